// Small accessible building blocks: labelled fields, alerts, dialogs, tables, states.
import type { ComponentChildren } from "preact";
import { useEffect, useId, useRef, useState } from "preact/hooks";
import { navigate } from "./router";

export function Link(props: { href: string; children: ComponentChildren; class?: string }) {
  const onClick = (event: MouseEvent) => {
    if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    navigate(props.href);
  };
  const current = location.pathname === props.href ? "page" : undefined;
  return (
    <a href={props.href} onClick={onClick} class={props.class} aria-current={current}>
      {props.children}
    </a>
  );
}

export function Alert({ error }: { error: string | null | undefined }) {
  if (!error) return null;
  return (
    <div role="alert" class="alert">
      {error}
    </div>
  );
}

export function Loading() {
  return (
    <div class="loading" role="progressbar" aria-label="Loading" aria-busy="true">
      Loading…
    </div>
  );
}

export function Empty({ text }: { text: string }) {
  return <p class="empty">{text}</p>;
}

type InputProps = {
  label: string;
  value: string;
  onValue: (value: string) => void;
  type?: string;
  invalid?: boolean;
  placeholder?: string;
  autoComplete?: string;
  autoFocus?: boolean;
  inputMode?: "numeric" | "decimal" | "text";
  readOnly?: boolean;
};

export function Field({ label, value, onValue, invalid, ...rest }: InputProps) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        value={value}
        aria-invalid={invalid ? "true" : undefined}
        onInput={(e) => onValue((e.target as HTMLInputElement).value)}
        {...rest}
      />
    </div>
  );
}

export function TextArea(props: { label: string; value: string; onValue: (v: string) => void;
  rows?: number; readOnly?: boolean }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <textarea id={id} rows={props.rows ?? 4} value={props.value} readOnly={props.readOnly}
        onInput={(e) => props.onValue((e.target as HTMLTextAreaElement).value)} />
    </div>
  );
}

export function Check(props: { label: string; checked: boolean; onChange: (v: boolean) => void }) {
  const id = useId();
  return (
    <div class="field check">
      <input id={id} type="checkbox" checked={props.checked}
        onChange={(e) => props.onChange((e.target as HTMLInputElement).checked)} />
      <label for={id}>{props.label}</label>
    </div>
  );
}

export type Option = { value: string; label: string };

export function Select(props: { label: string; value: string; options: Option[];
  onValue: (v: string) => void }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <select id={id} value={props.value}
        onChange={(e) => props.onValue((e.target as HTMLSelectElement).value)}>
        {props.options.map((o) => (
          <option key={o.value} value={o.value} selected={o.value === props.value}>
            {o.label}
          </option>
        ))}
      </select>
    </div>
  );
}

/** A modal dialog named by its heading; Escape and Cancel close it. */
export function Dialog(props: { title: string; onClose: () => void; children: ComponentChildren;
  onSubmit?: () => void | Promise<void>; submitLabel?: string; busy?: boolean;
  error?: string | null; hideCancel?: boolean; footer?: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    const cancel = (event: Event) => {
      event.preventDefault();
      props.onClose();
    };
    dialog?.addEventListener("cancel", cancel);
    return () => dialog?.removeEventListener("cancel", cancel);
  }, [props.onClose]);
  const submit = (event: Event) => {
    event.preventDefault();
    if (props.onSubmit && !props.busy) void props.onSubmit();
  };
  return (
    <dialog ref={ref} aria-labelledby={titleId} class="dialog">
      <form onSubmit={submit} noValidate>
        <h2 id={titleId}>{props.title}</h2>
        {props.children}
        <Alert error={props.error} />
        <div class="actions">
          {props.footer}
          {props.onSubmit && (
            <button type="submit" class="primary" disabled={props.busy}>
              {props.submitLabel ?? "Save"}
            </button>
          )}
          {!props.hideCancel && (
            <button type="button" onClick={props.onClose}>Cancel</button>
          )}
        </div>
      </form>
    </dialog>
  );
}

/** Confirmation of a destructive action: the confirm button repeats the action's name. */
export function Confirm(props: { title: string; text: string; action: string;
  onConfirm: () => Promise<void>; onClose: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      await props.onConfirm();
      props.onClose();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title={props.title} onClose={props.onClose} onSubmit={run} submitLabel={props.action}
      busy={busy} error={error}>
      <p>{props.text}</p>
    </Dialog>
  );
}

export type Column<T> = { title: string; cell: (row: T) => ComponentChildren };

export function Table<T>(props: { label: string; columns: Column<T>[]; rows: T[];
  rowKey: (row: T) => string | number }) {
  return (
    <div class="table-wrap">
      <table aria-label={props.label}>
        <thead>
          <tr>{props.columns.map((c) => <th scope="col" key={c.title}>{c.title}</th>)}</tr>
        </thead>
        <tbody>
          {props.rows.map((row) => (
            <tr key={props.rowKey(row)}>
              {props.columns.map((c) => <td key={c.title}>{c.cell(row)}</td>)}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function formatTime(value: string | null | undefined): string {
  if (!value) return "—";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toLocaleString();
}
