// Claude on Amazon Bedrock and on Google Vertex AI, GPT on Azure OpenAI,
// Gemini on the Gemini API and on Vertex AI, through keel serve (issue 27):
// the official @anthropic-ai/sdk (messages.create, stream) and openai SDK
// (chat.completions, streamed and not) call models keel serves from the
// simulator's fronts, each checking the platform's own authentication:
// Bedrock (an API key; eventstream), Vertex (a service account's OAuth2
// token; Claude's rawPredict and Gemini's generateContent), Azure OpenAI
// (a deployment URL with api-version and api-key) and the Gemini API
// (x-goog-api-key). The clients see Keel's APIs only.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { keelURL, env, run, done, check } from './lib.mjs';

const anthropic = new Anthropic({ baseURL: keelURL(), apiKey: 'sk-ant-keel-clients', maxRetries: 0, timeout: 30_000 });
const openai = new OpenAI({ baseURL: keelURL() + '/v1', apiKey: 'sk-keel-clients', maxRetries: 0, timeout: 30_000 });
// KEEL_CLOUD_MODELS is "PLATFORM=MODEL,…": bedrock, vertex, azure, gemini,
// vertex_gemini.
const models = Object.fromEntries(env('KEEL_CLOUD_MODELS').split(',').map((kv) => kv.split('=')));

for (const [p, model] of Object.entries(models)) {
  await run(`${p}.anthropic_create`, async () => {
    const prompt = `(case clouds.${p}.anthropic_create) Say something about glaciers.`;
    const r = await anthropic.messages.create({ model, max_tokens: 128, messages: [{ role: 'user', content: prompt }] });
    check(r.type === 'message' && r.stop_reason === 'end_turn', `a finished message, got ${r.type} ${r.stop_reason}`);
    return { prompt, text: r.content.filter((b) => b.type === 'text').map((b) => b.text).join('') };
  });

  await run(`${p}.anthropic_stream`, async () => {
    const prompt = `(case clouds.${p}.anthropic_stream) Say something about deltas.`;
    const stream = anthropic.messages.stream({ model, max_tokens: 128, messages: [{ role: 'user', content: prompt }] });
    const m = await stream.finalMessage();
    check(m.stop_reason === 'end_turn', `stop_reason end_turn, got ${m.stop_reason}`);
    return { prompt, text: m.content.filter((b) => b.type === 'text').map((b) => b.text).join('') };
  });

  await run(`${p}.openai_chat`, async () => {
    const prompt = `(case clouds.${p}.openai_chat) Say something about fjords.`;
    const r = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }] });
    check(r.object === 'chat.completion', `object chat.completion, got ${r.object}`);
    return { prompt, text: r.choices[0].message.content };
  });

  await run(`${p}.openai_chat_stream`, async () => {
    const prompt = `(case clouds.${p}.openai_chat_stream) Say something about estuaries.`;
    const stream = await openai.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: prompt }] });
    let text = '';
    let finish = null;
    for await (const ch of stream) {
      if (ch.choices.length > 0) {
        text += ch.choices[0].delta.content ?? '';
        finish = ch.choices[0].finish_reason ?? finish;
      }
    }
    check(finish === 'stop', `finish_reason stop, got ${finish}`);
    return { prompt, text };
  });
}

done();
