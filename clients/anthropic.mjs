// The official @anthropic-ai/sdk against keel serve: messages.countTokens,
// models.retrieve, messages.create and messages.stream.
import Anthropic from '@anthropic-ai/sdk';
import { keelURL, env, run, done, check } from './lib.mjs';

const client = new Anthropic({ baseURL: keelURL(), apiKey: 'sk-ant-keel-clients', maxRetries: 0, timeout: 30_000 });
const model = env('KEEL_ANTHROPIC_MODEL');

await run('count_tokens', async () => {
  const prompt = '(case anthropic.count_tokens) How many tokens is this?';
  const r = await client.messages.countTokens({
    model,
    messages: [{ role: 'user', content: prompt }],
  });
  check(Number.isInteger(r.input_tokens) && r.input_tokens > 0, `input_tokens, got ${JSON.stringify(r)}`);
  return { prompt, input_tokens: r.input_tokens };
});

await run('models_retrieve', async () => {
  const m = await client.models.retrieve(model);
  check(m.id === model && m.type === 'model', `model ${model}, got ${JSON.stringify(m)}`);
  return { model: m };
});

await run('create', async () => {
  const prompt = '(case anthropic.create) Say something about lakes.';
  const r = await client.messages.create({
    model,
    max_tokens: 256,
    messages: [{ role: 'user', content: prompt }],
  });
  check(r.type === 'message' && r.stop_reason === 'end_turn', `a finished message, got ${r.type} ${r.stop_reason}`);
  return { prompt, text: r.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), usage: r.usage };
});

await run('stream', async () => {
  const prompt = '(case anthropic.stream) Say something about the sea.';
  const stream = client.messages.stream({
    model,
    max_tokens: 256,
    messages: [{ role: 'user', content: prompt }],
  });
  let text = '';
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  const finalText = final.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  check(finalText === text, `the final message holds the streamed text: ${JSON.stringify(finalText)} vs ${JSON.stringify(text)}`);
  check(final.stop_reason === 'end_turn', `stop_reason end_turn, got ${final.stop_reason}`);
  return { prompt, text, usage: final.usage };
});

done();
