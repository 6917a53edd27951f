// The CPython 3.14 oracle: Pyodide under Node, speaking _oracle_worker.py's protocol.
//
// usage: node _pyodide_worker.mjs PYODIDE_PACKAGE_DIR ORACLE_WORKER_PY
//
// Pyodide loads once (about 4 s); the worker's code is run in a namespace of
// its own (so its main() does not start) and its hello() and handle() answer
// the greeting and each request line as it arrives.  If Python fails in a
// way that may leave the interpreter unusable (a JavaScript stack overflow on
// absurdly nested input), the request gets a reply without a verdict
// ("ok": null) and the worker exits, so the caller starts a fresh one.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const [packageDir, workerPath] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(join(packageDir, "pyodide.mjs")).href);
const pyodide = await loadPyodide({
  indexURL: packageDir + "/",
  stdout: () => {},
  stderr: () => {},
});
const namespace = pyodide.globals.get("dict")();
namespace.set("__name__", "_oracle_worker");
pyodide.runPython(readFileSync(workerPath, "utf8"), { globals: namespace });
pyodide.runPython("import warnings; warnings.simplefilter('ignore')", { globals: namespace });
const hello = namespace.get("hello");
const handle = namespace.get("handle");

const write = (line) => new Promise((done) => process.stdout.write(line + "\n", done));
await write(hello());
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  let reply;
  try {
    reply = handle(line);
  } catch (error) {
    let id = null;
    try {
      id = JSON.parse(line).id;
    } catch {}
    const message = String(error && error.message ? error.message : error).split("\n")[0];
    await write(JSON.stringify({ id, ok: null, error: `Pyodide failed: ${message}` }));
    process.exit(3);
  }
  if (reply) await write(reply);
}
