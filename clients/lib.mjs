// Shared by the client scripts: the environment the Go test
// (e2e/clients_test.go) passes, and the one-line JSON results it reads.
//
// Each script runs its calls one after another; each call prints one line
// {"call": NAME, ...result} or {"call": NAME, "error": MESSAGE} on stdout, so
// the test asserts every call on its own and one failure hides no other.
// The script exits 1 when a call failed.

export function env(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is not set (the Go test sets it: go test ./e2e -run TestClients)`);
    process.exit(2);
  }
  return v;
}

// KEEL_URL is keel serve's root, e.g. http://127.0.0.1:7878 (no /v1).
export const keelURL = () => env('KEEL_URL').replace(/\/+$/, '');

let failed = false;

// run runs one named call and prints its result line; fn returns an object
// (the result) or throws.
export async function run(call, fn) {
  try {
    const out = await fn();
    console.log(JSON.stringify({ call, ...out }));
  } catch (e) {
    failed = true;
    let msg = String(e);
    if (e && e.status) msg = `status ${e.status}: ${msg}`;
    if (e && e.cause) msg += ` (cause: ${e.cause})`;
    if (e && e.responseBody) msg += `\nresponse body: ${e.responseBody}`;
    console.log(JSON.stringify({ call, error: msg }));
  }
}

export function done() {
  process.exitCode = failed ? 1 : 0;
}

// check throws when cond is false; the message names what was expected.
export function check(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}
