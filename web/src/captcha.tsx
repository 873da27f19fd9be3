// The hCaptcha widget, loaded only while an administrator enabled it (W6 allows its host then).
import { useEffect, useRef } from "preact/hooks";

declare global {
  interface Window {
    hcaptcha?: { render: (el: HTMLElement, options: Record<string, unknown>) => string;
      reset: (id?: string) => void };
    lockgateCaptchaLoaded?: () => void;
  }
}

const SCRIPT = "https://js.hcaptcha.com/1/api.js?render=explicit&onload=lockgateCaptchaLoaded";

let loading: Promise<void> | null = null;

function loadScript(): Promise<void> {
  if (window.hcaptcha) return Promise.resolve();
  if (!loading) {
    loading = new Promise<void>((resolve, reject) => {
      window.lockgateCaptchaLoaded = () => resolve();
      const script = document.createElement("script");
      script.src = SCRIPT;
      script.async = true;
      script.onerror = () => {
        loading = null;
        reject(new Error("The captcha could not be loaded"));
      };
      document.head.appendChild(script);
    });
  }
  return loading;
}

/** Renders the widget; ``onToken`` receives the solved token ("" when it expires). */
export function Captcha(props: { siteKey: string; onToken: (token: string) => void;
  onError: (text: string) => void }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    let cancelled = false;
    loadScript().then(() => {
      if (cancelled || !box.current || !window.hcaptcha) return;
      window.hcaptcha.render(box.current, {
        sitekey: props.siteKey,
        callback: (token: string) => props.onToken(token),
        "expired-callback": () => props.onToken(""),
      });
    }).catch((e: Error) => props.onError(e.message));
    return () => {
      cancelled = true;
    };
  }, [props.siteKey]);
  return <div ref={box} class="captcha" aria-label="Captcha" role="group" />;
}
