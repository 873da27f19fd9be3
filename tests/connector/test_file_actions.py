"""The §2.7 file actions on a real filesystem, under the §2.6 path rules."""

from __future__ import annotations

import hashlib
import os
import tempfile

from twisted.trial.unittest import TestCase

from connector.actions import files
from connector.actions.outcome import ActionError
from connector.workspace import Workspace


class WorkspaceCase(TestCase):
    def setUp(self) -> None:
        self.base = tempfile.mkdtemp(prefix="lockgate-ws-")
        self.root = os.path.join(self.base, "ws")
        self.outside = os.path.join(self.base, "outside")
        os.makedirs(self.root)
        os.makedirs(self.outside)
        with open(os.path.join(self.outside, "secret.txt"), "w") as handle:
            handle.write("top secret")
        self.ws = Workspace.for_task(self.root, "/")

    def tearDown(self) -> None:
        import shutil

        shutil.rmtree(self.base)

    def put(self, relative: str, content: str | bytes) -> str:
        path = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(content.encode() if isinstance(content, str) else content)
        return path

    def refused(self, message: str, action, payload, workspace=None):
        with self.assertRaises(ActionError) as caught:
            action(workspace or self.ws, payload)
        self.assertEqual(str(caught.exception), message)


class PathRuleTests(WorkspaceCase):
    def test_relative_paths_resolve_inside_the_workspace(self) -> None:
        self.put("src/a.txt", "hello")
        self.assertEqual(files.read_file(self.ws, {"path": "src/a.txt"}).result, "hello")
        self.assertEqual(files.read_file(self.ws, {"path": "src/../src/./a.txt"}).result, "hello")

    def test_absolute_path_in_a_workspace_is_refused(self) -> None:
        target = self.put("a.txt", "x")
        self.refused("path must be relative to the workspace", files.read_file, {"path": target})

    def test_dot_dot_escape_is_refused(self) -> None:
        self.refused("path escapes the workspace", files.read_file, {"path": "../outside/secret.txt"})
        self.refused("path escapes the workspace", files.list_files, {"path": ".."})

    def test_a_sibling_with_the_root_as_prefix_is_outside(self) -> None:
        os.makedirs(self.root + "-evil")
        self.refused("path escapes the workspace", files.list_files, {"path": "../ws-evil"})

    def test_symlink_escape_is_refused_for_reads_and_writes(self) -> None:
        os.symlink(self.outside, os.path.join(self.root, "link"))
        os.symlink(os.path.join(self.outside, "secret.txt"), os.path.join(self.root, "s.txt"))
        self.refused("path escapes the workspace", files.read_file, {"path": "link/secret.txt"})
        self.refused("path escapes the workspace", files.read_file, {"path": "s.txt"})
        self.refused("path escapes the workspace", files.file_sha256, {"path": "s.txt"})
        self.refused(
            "path escapes the workspace",
            files.write_file,
            {"path": "link/new.txt", "content": "pwned", "create_dirs": True},
        )
        self.refused(
            "path escapes the workspace",
            files.replace_text,
            {"path": "s.txt", "old_text": "top", "new_text": "no"},
        )
        self.assertFalse(os.path.exists(os.path.join(self.outside, "new.txt")))
        with open(os.path.join(self.outside, "secret.txt")) as handle:
            self.assertEqual(handle.read(), "top secret")

    def test_symlink_inside_the_workspace_is_followed(self) -> None:
        self.put("real/a.txt", "inside")
        os.symlink(os.path.join(self.root, "real"), os.path.join(self.root, "alias"))
        self.assertEqual(files.read_file(self.ws, {"path": "alias/a.txt"}).result, "inside")

    def test_unrestricted_tasks_need_absolute_paths(self) -> None:
        free = Workspace.for_task("", self.base)
        self.refused(
            "path must be absolute when no workspace is selected",
            files.read_file,
            {"path": "outside/secret.txt"},
            free,
        )
        secret = os.path.join(self.outside, "secret.txt")
        self.assertEqual(files.read_file(free, {"path": secret}).result, "top secret")

    def test_workspace_path_itself_is_checked(self) -> None:
        for path, message in [
            ("relative/dir", "workspace path must be absolute"),
            (os.path.join(self.base, "missing"), "workspace path does not exist"),
            (os.path.join(self.outside, "secret.txt"), "workspace path is not a directory"),
        ]:
            with self.assertRaises(ActionError) as caught:
                Workspace.for_task(path, "/")
            self.assertTrue(str(caught.exception).startswith(message), str(caught.exception))

    def test_nul_bytes_and_empty_paths_are_refused(self) -> None:
        self.refused("path must not contain NUL bytes", files.read_file, {"path": "a\x00b"})
        self.refused("path is required", files.read_file, {"path": ""})
        self.refused("path must be a string", files.read_file, {"path": 7})


class ListAndReadTests(WorkspaceCase):
    def test_list_files_marks_directories_and_sizes_sorted(self) -> None:
        self.put("b.txt", "12345")
        os.makedirs(os.path.join(self.root, "a-dir"))
        self.assertEqual(
            files.list_files(self.ws, {}).result, "a-dir/\nb.txt (5 bytes)"
        )

    def test_list_files_caps_entries(self) -> None:
        for i in range(600):
            self.put(f"f{i:03d}", "")
        default = files.list_files(self.ws, {"path": "."}).result.splitlines()
        self.assertEqual(len(default), 101)
        self.assertEqual(default[-1], "... (500 more entries)")
        capped = files.list_files(self.ws, {"max_entries": 10_000}).result.splitlines()
        self.assertEqual(len(capped), 501)
        self.assertEqual(capped[-1], "... (100 more entries)")

    def test_read_file_caps_bytes(self) -> None:
        self.put("big.txt", "x" * 300_000)
        default = files.read_file(self.ws, {"path": "big.txt"}).result
        self.assertTrue(default.startswith("x" * 120_000 + "\n...(truncated"))
        most = files.read_file(self.ws, {"path": "big.txt", "max_bytes": 999_999}).result
        self.assertEqual(most.count("x"), 200_000)
        small = files.read_file(self.ws, {"path": "big.txt", "max_bytes": 3}).result
        self.assertEqual(small, "xxx\n...(truncated at 3 bytes)")

    def test_read_file_refuses_directories_and_missing_files(self) -> None:
        os.makedirs(os.path.join(self.root, "d"))
        self.refused("not a regular file: d", files.read_file, {"path": "d"})
        self.refused("file not found: nope.txt", files.read_file, {"path": "nope.txt"})

    def test_file_sha256_is_the_digest_of_the_whole_file(self) -> None:
        data = os.urandom(3 * 1024 * 1024 + 17)
        self.put("blob.bin", data)
        self.assertEqual(
            files.file_sha256(self.ws, {"path": "blob.bin"}).result,
            hashlib.sha256(data).hexdigest(),
        )


class WriteTests(WorkspaceCase):
    def test_write_creates_a_file(self) -> None:
        result = files.write_file(self.ws, {"path": "new.txt", "content": "héllo"})
        self.assertEqual(result.result, "Wrote 6 bytes to new.txt")
        with open(os.path.join(self.root, "new.txt"), encoding="utf-8") as handle:
            self.assertEqual(handle.read(), "héllo")

    def test_existing_file_needs_overwrite(self) -> None:
        self.put("a.txt", "old")
        self.refused(
            "file already exists: a.txt (set overwrite to replace it)",
            files.write_file,
            {"path": "a.txt", "content": "new"},
        )
        files.write_file(self.ws, {"path": "a.txt", "content": "new", "overwrite": True})
        with open(os.path.join(self.root, "a.txt")) as handle:
            self.assertEqual(handle.read(), "new")

    def test_missing_parent_needs_create_dirs(self) -> None:
        self.refused(
            "parent directory does not exist: x/y",
            files.write_file,
            {"path": "x/y/z.txt", "content": "1"},
        )
        self.assertFalse(os.path.exists(os.path.join(self.root, "x")))
        files.write_file(self.ws, {"path": "x/y/z.txt", "content": "1", "create_dirs": True})
        self.assertTrue(os.path.isfile(os.path.join(self.root, "x/y/z.txt")))

    def test_overwriting_a_symlink_inside_replaces_the_link_target_path_only(self) -> None:
        self.put("target.txt", "target")
        os.symlink("target.txt", os.path.join(self.root, "ln"))
        files.write_file(self.ws, {"path": "ln", "content": "via link", "overwrite": True})
        with open(os.path.join(self.root, "target.txt")) as handle:
            self.assertEqual(handle.read(), "via link")

    def test_write_leaves_no_temporary_files(self) -> None:
        files.write_file(self.ws, {"path": "a.txt", "content": "x"})
        self.assertEqual(os.listdir(self.root), ["a.txt"])


class ReplaceTextTests(WorkspaceCase):
    def test_exactly_one_occurrence_is_replaced(self) -> None:
        path = self.put("a.py", "alpha\nbeta\ngamma\n")
        result = files.replace_text(self.ws, {"path": "a.py", "old_text": "beta", "new_text": "BETA"})
        self.assertEqual(result.result, "Applied 1 replacement to a.py")
        with open(path) as handle:
            self.assertEqual(handle.read(), "alpha\nBETA\ngamma\n")

    def test_missing_and_ambiguous_old_text_change_nothing(self) -> None:
        path = self.put("a.py", "x = 1\nx = 1\n")
        self.refused(
            "old_text not found in a.py",
            files.replace_text,
            {"path": "a.py", "old_text": "y", "new_text": "z"},
        )
        self.refused(
            "old_text occurs 2 times in a.py; it must be unique",
            files.replace_text,
            {"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"},
        )
        self.refused("old_text is required", files.replace_text, {"path": "a.py", "old_text": ""})
        with open(path) as handle:
            self.assertEqual(handle.read(), "x = 1\nx = 1\n")

    def test_replacements_apply_in_order_all_or_nothing(self) -> None:
        path = self.put("a.txt", "one two three")
        payload = {
            "path": "a.txt",
            "replacements": [
                {"old_text": "one", "new_text": "1"},
                {"old_text": "1 two", "new_text": "1-2"},
            ],
        }
        self.assertEqual(
            files.replace_text(self.ws, payload).result, "Applied 2 replacements to a.txt"
        )
        with open(path) as handle:
            self.assertEqual(handle.read(), "1-2 three")
        payload = {
            "path": "a.txt",
            "replacements": [
                {"old_text": "three", "new_text": "3"},
                {"old_text": "missing", "new_text": "?"},
            ],
        }
        self.refused("replacement 2: old_text not found in a.txt", files.replace_text, payload)
        with open(path) as handle:
            self.assertEqual(handle.read(), "1-2 three")

    def test_replace_keeps_the_file_mode(self) -> None:
        path = self.put("run.sh", "echo a\n")
        os.chmod(path, 0o755)
        files.replace_text(self.ws, {"path": "run.sh", "old_text": "a", "new_text": "b"})
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o755)
