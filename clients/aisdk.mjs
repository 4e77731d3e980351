// The Vercel AI SDK against keel serve: openai(model) (the Responses API,
// the provider's default), openai.chat(model) (Chat Completions) and
// anthropic(model) (Messages), each with generateText, streamText and
// generateObject; and openai(model)'s tool loop on a Responses endpoint and
// on an Anthropic one (with store left on, the SDK sends the earlier
// answer's message back as an item_reference).
import { generateText, streamText, generateObject, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { z } from 'zod';
import { keelURL, env, run, done, check } from './lib.mjs';

// The SDK prints warnings (e.g. an unknown model's output limit) with
// console; the test reads stdout, so they are off.
globalThis.AI_SDK_LOG_WARNINGS = false;

const openai = createOpenAI({ baseURL: keelURL() + '/v1', apiKey: 'sk-keel-clients' });
const anthropic = createAnthropic({ baseURL: keelURL() + '/v1', apiKey: 'sk-ant-keel-clients' });

const providers = [
  ['openai', openai(env('KEEL_RESPONSES_MODEL'))],
  ['openai_chat', openai.chat(env('KEEL_CHAT_MODEL'))],
  ['anthropic', anthropic(env('KEEL_ANTHROPIC_MODEL'))],
];

const city = z.object({ name: z.string(), population: z.number().int() });

for (const [name, model] of providers) {
  await run(`${name}.generateText`, async () => {
    const r = await generateText({ model, prompt: `(case aisdk.${name}.generateText) Say something about bridges.`, maxRetries: 0, maxOutputTokens: 1024 });
    check(r.finishReason === 'stop', `finishReason stop, got ${r.finishReason}`);
    check(r.text.length > 0, 'a text answer');
    return { text: r.text, usage: r.usage };
  });

  await run(`${name}.streamText`, async () => {
    const errors = [];
    const r = streamText({ model, prompt: `(case aisdk.${name}.streamText) Say something about harbors.`, maxRetries: 0, maxOutputTokens: 1024, onError: ({ error }) => errors.push(error) });
    let text = '';
    for await (const t of r.textStream) text += t;
    check(errors.length === 0, `no stream error, got ${errors.map(String).join('; ')}`);
    check(text === (await r.text), 'textStream and text agree');
    check((await r.finishReason) === 'stop', `finishReason stop, got ${await r.finishReason}`);
    check(text.length > 0, 'a text answer');
    return { text };
  });

  await run(`${name}.generateObject`, async () => {
    const r = await generateObject({ model, schema: city, prompt: `(case aisdk.${name}.generateObject) Describe a city.`, maxRetries: 0, maxOutputTokens: 1024 });
    check(typeof r.object.name === 'string' && Number.isInteger(r.object.population), `an object matching the schema, got ${JSON.stringify(r.object)}`);
    return { object: r.object };
  });
}

const weather = tool({
  description: 'Weather for a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async () => 'Rainy, 9 C',
});

for (const [name, model] of [
  ['openai', openai(env('KEEL_RESPONSES_MODEL'))],
  ['openai_on_anthropic', openai(env('KEEL_ANTHROPIC_MODEL'))],
]) {
  await run(`${name}.tools`, async () => {
    const r = await generateText({ model, prompt: `(case aisdk.${name}.tools) Please use get_weather for Oslo.`, tools: { get_weather: weather },
      stopWhen: stepCountIs(3), maxRetries: 0, maxOutputTokens: 1024 });
    check(r.steps.length === 2, `two steps (the call, then the answer), got ${r.steps.length}`);
    check(r.finishReason === 'stop', `finishReason stop, got ${r.finishReason}`);
    return { text: r.text };
  });
}

done();
