// Codex CLI (`codex exec`) against keel serve: a model provider whose
// base_url is keel's /v1 with wire_api = "responses" (the only protocol this
// Codex speaks), once per model in KEEL_CODEX_MODELS ("label=model,…": one
// model served by an OpenAI Responses endpoint, one by an Anthropic
// endpoint). Each run has its own CODEX_HOME and HOME in a temporary
// directory; plugins (which fetch catalogs from github.com and chatgpt.com at
// startup), the update check and analytics are off. KEEL_CANARY_PROXY, when
// set, becomes HTTP(S)_PROXY so that any connection that is not to loopback
// reaches the test's canary instead of the internet.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { keelURL, env, run, done, check } from './lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const codexBin = join(here, 'node_modules', '.bin', 'codex');

function configTOML(model) {
  return `model = "${model}"
model_provider = "keel"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[features]
plugins = false

[analytics]
enabled = false

[model_providers.keel]
name = "Keel"
base_url = "${keelURL()}/v1"
wire_api = "responses"
env_key = "KEEL_CODEX_API_KEY"
request_max_retries = 0
stream_max_retries = 0
`;
}

export function proxyEnv() {
  const p = process.env.KEEL_CANARY_PROXY;
  if (!p) return {};
  return { HTTP_PROXY: p, HTTPS_PROXY: p, ALL_PROXY: p, http_proxy: p, https_proxy: p, all_proxy: p, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
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

for (const pair of env('KEEL_CODEX_MODELS').split(',')) {
  const [label, model] = pair.split('=');
  await run(`exec.${label}`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-codex-'));
    try {
      const home = join(dir, 'home');
      const work = join(dir, 'work');
      mkdirSync(home);
      mkdirSync(work);
      writeFileSync(join(home, 'config.toml'), configTOML(model));
      const last = join(dir, 'last-message.txt');
      const prompt = `(case codex.exec.${label}) Say something about rivers.`;
      const r = await exec(codexBin, ['exec', '--skip-git-repo-check', '--output-last-message', last, prompt], {
        cwd: work,
        env: { PATH: process.env.PATH, HOME: home, CODEX_HOME: home, KEEL_CODEX_API_KEY: 'sk-keel-clients', ...proxyEnv() },
      }, 90_000);
      check(r.code === 0, `codex exec exits 0, got ${r.code ?? r.signal}; stderr: ${r.err.slice(-2000)}`);
      check(existsSync(last), 'the last message file');
      const text = readFileSync(last, 'utf8').trim();
      check(text.length > 0, 'a last message');
      return { model, text, stdout: r.out.trim() };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

done();
