// Claude Code (`claude -p`) against keel serve: one plain question and one
// tool round trip (the prompt names Glob, so the simulator answers a Glob
// tool_use; Claude Code runs it in an empty temporary directory and sends the
// tool_result; the simulator's next answer is what claude prints). Each run
// has its own HOME; telemetry, nonessential traffic and the autoupdater are
// off. KEEL_CANARY_PROXY: as in codex.mjs.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, mkdirSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { keelURL, env, run, done, check } from './lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const model = env('KEEL_ANTHROPIC_MODEL');

// claudeBin is the native binary of this platform's optional package, which
// the package's postinstall otherwise copies over bin/claude.exe (so this
// works whether or not npm ran install scripts).
function claudeBin() {
  const require = createRequire(import.meta.url);
  try {
    const pkg = require.resolve(`@anthropic-ai/claude-code-${process.platform}-${process.arch}/package.json`);
    const bin = join(dirname(pkg), 'claude');
    if (existsSync(bin)) return bin;
  } catch {}
  return join(here, 'node_modules', '.bin', 'claude');
}

function proxyEnv() {
  const p = process.env.KEEL_CANARY_PROXY;
  if (!p) return {};
  return { HTTP_PROXY: p, HTTPS_PROXY: p, http_proxy: p, https_proxy: p, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
}

function exec(cmd, args, opts, timeoutMs) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, out, err }); });
  });
}

async function claude(prompt, extra) {
  const dir = mkdtempSync(join(tmpdir(), 'keel-claude-'));
  try {
    const home = join(dir, 'home');
    const work = join(dir, 'work');
    mkdirSync(home);
    mkdirSync(work);
    const r = await exec(claudeBin(), ['-p', prompt, '--output-format', 'json', '--model', model, ...extra], {
      cwd: work,
      env: {
        PATH: process.env.PATH,
        HOME: home,
        ANTHROPIC_BASE_URL: keelURL(),
        ANTHROPIC_API_KEY: 'sk-ant-keel-clients',
        // The small fast model (titles, summaries) is the same model, so no
        // call names a model keel does not serve.
        ANTHROPIC_SMALL_FAST_MODEL: model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
        ...proxyEnv(),
      },
    }, 90_000);
    check(r.code === 0, `claude -p exits 0, got ${r.code ?? r.signal}; stdout: ${r.out.slice(-1000)} stderr: ${r.err.slice(-2000)}`);
    const res = JSON.parse(r.out);
    check(res.type === 'result' && res.subtype === 'success' && !res.is_error, `a successful result, got ${r.out.slice(0, 500)}`);
    return res;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await run('print', async () => {
  const res = await claude('(case claude.print) Say something about rivers.', []);
  check(res.num_turns === 1, `one turn, got ${res.num_turns}`);
  return { text: res.result, num_turns: res.num_turns };
});

await run('tool', async () => {
  const res = await claude('(case claude.tool) Use Glob to list the files.', ['--allowedTools', 'Glob']);
  check(res.num_turns === 2, `two turns (tool_use, then the answer), got ${res.num_turns}`);
  return { text: res.result, num_turns: res.num_turns };
});

done();
