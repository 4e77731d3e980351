// The official openai Node SDK against keel serve: Chat Completions (also
// at a base URL without /v1, and a function tool round trip), the Responses
// API (streamed and not, a function tool round trip, text.format
// json_schema), embeddings.create and models.retrieve.
import OpenAI from 'openai';
import { keelURL, env, run, done, check } from './lib.mjs';

const client = new OpenAI({ baseURL: keelURL() + '/v1', apiKey: 'sk-keel-clients', maxRetries: 0, timeout: 30_000 });
const chatModel = env('KEEL_CHAT_MODEL');
const respModel = env('KEEL_RESPONSES_MODEL');
const embedModel = env('KEEL_EMBED_MODEL');

const weatherTool = {
  name: 'get_weather',
  description: 'Current weather in a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
};

await run('chat', async () => {
  const prompt = '(case openai.chat) Say something about rivers.';
  const r = await client.chat.completions.create({ model: chatModel, messages: [{ role: 'user', content: prompt }] });
  check(r.object === 'chat.completion', `object chat.completion, got ${r.object}`);
  const text = r.choices[0].message.content;
  check(typeof text === 'string' && text.length > 0, 'a text answer');
  return { prompt, text, finish_reason: r.choices[0].finish_reason };
});

// OpenAI-compatible servers commonly accept the API paths without /v1, and
// clients configured with such a base URL send them: POST /chat/completions.
await run('chat_no_v1', async () => {
  const bare = new OpenAI({ baseURL: keelURL(), apiKey: 'sk-keel-clients', maxRetries: 0, timeout: 30_000 });
  const prompt = '(case openai.chat_no_v1) Say something about valleys.';
  const r = await bare.chat.completions.create({ model: chatModel, messages: [{ role: 'user', content: prompt }] });
  return { prompt, text: r.choices[0].message.content };
});

await run('chat_tool', async () => {
  const tools = [{ type: 'function', function: weatherTool }];
  const messages = [{ role: 'user', content: '(case openai.chat_tool) Call get_weather for Paris.' }];
  const first = await client.chat.completions.create({ model: chatModel, messages, tools });
  const msg = first.choices[0].message;
  check(first.choices[0].finish_reason === 'tool_calls', `finish_reason tool_calls, got ${first.choices[0].finish_reason}`);
  check(msg.tool_calls?.length === 1 && msg.tool_calls[0].function.name === 'get_weather', `one get_weather call, got ${JSON.stringify(msg.tool_calls)}`);
  const args = JSON.parse(msg.tool_calls[0].function.arguments);
  check(typeof args.city === 'string', `arguments with a city, got ${msg.tool_calls[0].function.arguments}`);
  messages.push(msg, { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: 'Sunny, 21 C' });
  const second = await client.chat.completions.create({ model: chatModel, messages, tools });
  check(second.choices[0].finish_reason === 'stop', `finish_reason stop after the tool result, got ${second.choices[0].finish_reason}`);
  return { tool: msg.tool_calls[0].function.name, arguments: args, text: second.choices[0].message.content };
});

await run('responses', async () => {
  const prompt = '(case openai.responses) Say something about mountains.';
  const r = await client.responses.create({ model: respModel, input: prompt });
  check(r.object === 'response', `object response, got ${r.object}`);
  check(r.status === 'completed', `status completed, got ${r.status}`);
  check(r.output_text.length > 0, 'a text answer');
  return { prompt, text: r.output_text, usage: r.usage };
});

await run('responses_stream', async () => {
  const prompt = '(case openai.responses_stream) Say something about forests.';
  const stream = await client.responses.create({ model: respModel, input: [{ role: 'user', content: prompt }], stream: true });
  let text = '';
  const types = [];
  let final;
  let seq = -1;
  for await (const ev of stream) {
    types.push(ev.type);
    check(ev.sequence_number > seq, `sequence_number increasing, got ${ev.sequence_number} after ${seq}`);
    seq = ev.sequence_number;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') final = ev.response;
  }
  check(final, `a response.completed event, got ${types.join(',')}`);
  const finalText = final.output.filter((o) => o.type === 'message').flatMap((o) => o.content).filter((c) => c.type === 'output_text').map((c) => c.text).join('');
  check(finalText === text, `response.completed holds the streamed text: ${JSON.stringify(finalText)} vs ${JSON.stringify(text)}`);
  return { prompt, text, first: types[0], last: types[types.length - 1] };
});

await run('responses_tool', async () => {
  const tools = [{ type: 'function', strict: true, ...weatherTool }];
  const input = [{ role: 'user', content: '(case openai.responses_tool) Call get_weather for Lima.' }];
  const first = await client.responses.create({ model: respModel, input, tools, store: false });
  const calls = first.output.filter((o) => o.type === 'function_call');
  check(calls.length === 1 && calls[0].name === 'get_weather', `one get_weather function_call, got ${JSON.stringify(first.output)}`);
  const args = JSON.parse(calls[0].arguments);
  check(typeof args.city === 'string', `arguments with a city, got ${calls[0].arguments}`);
  input.push(...first.output, { type: 'function_call_output', call_id: calls[0].call_id, output: 'Cloudy, 18 C' });
  const second = await client.responses.create({ model: respModel, input, tools, store: false });
  check(second.status === 'completed', `status completed, got ${second.status}`);
  check(second.output.every((o) => o.type !== 'function_call'), 'no second call after the tool output');
  return { tool: calls[0].name, arguments: args, text: second.output_text };
});

await run('responses_json_schema', async () => {
  const r = await client.responses.create({
    model: respModel,
    input: '(case openai.responses_json_schema) Describe a city.',
    text: {
      format: {
        type: 'json_schema',
        name: 'city',
        strict: true,
        schema: {
          type: 'object',
          properties: { name: { type: 'string' }, population: { type: 'integer' } },
          required: ['name', 'population'],
          additionalProperties: false,
        },
      },
    },
  });
  const obj = JSON.parse(r.output_text);
  check(typeof obj.name === 'string' && Number.isInteger(obj.population), `an object matching the schema, got ${r.output_text}`);
  return { text: r.output_text, object: obj };
});

await run('embeddings', async () => {
  const input = '(case openai.embeddings) The quick brown fox jumps over the lazy dog.';
  const r = await client.embeddings.create({ model: embedModel, input });
  check(r.object === 'list' && r.data.length === 1, `one embedding, got ${JSON.stringify(r).slice(0, 200)}`);
  return { input, model: r.model, embedding: Array.from(r.data[0].embedding), usage: r.usage };
});

await run('models_retrieve', async () => {
  const m = await client.models.retrieve(chatModel);
  check(m.id === chatModel && m.object === 'model', `model ${chatModel}, got ${JSON.stringify(m)}`);
  return { model: m };
});

done();
