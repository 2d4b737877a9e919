// The official `openai` npm client, unchanged, against `deepinfer serve` on the mini model.
// usage: node openai_client_test.mjs BASE_URL API_KEY MODEL
// Every check compares the server's answers with each other or with the request (the model has
// random weights, so no output text is hard-coded); exits 1 on the first failed check.
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: [{ type: "text", text: "Name a colour." }] },
];
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed = 1;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}
async function expectStatus(status, fn, messagePart) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, status, `status ${e.status}: ${e.message}`);
    assert.ok(e.error && typeof e.error.message === "string", "OpenAI error shape");
    if (messagePart) assert.match(e.error.message, messagePart);
    return;
  }
  assert.fail(`expected HTTP ${status}`);
}

await check("models", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
});

let plain;
await check("chat", async () => {
  plain = await client.chat.completions.create({ model, messages, max_tokens: 6, seed: 7 });
  assert.equal(plain.object, "chat.completion");
  assert.equal(plain.choices.length, 1);
  const m = plain.choices[0].message;
  assert.equal(m.role, "assistant");
  assert.ok(plain.usage.prompt_tokens > 10);
  assert.ok(plain.usage.completion_tokens >= 1 && plain.usage.completion_tokens <= 6);
  assert.equal(plain.usage.total_tokens, plain.usage.prompt_tokens + plain.usage.completion_tokens);
  // Thinking is on by default: the reply starts as reasoning.
  assert.equal(typeof m.reasoning_content, "string");
  const again = await client.chat.completions.create({ model, messages, max_tokens: 6, seed: 7 });
  assert.deepEqual(again.choices[0].message, m, "same seed, same reply");
});

await check("chat streaming with usage equals the non-streamed reply", async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 6, seed: 7, stream: true, stream_options: { include_usage: true },
  });
  let reasoning = "", content = "", usage = null, finish = null, chunks = 0, role = null;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      reasoning += c.delta.reasoning_content ?? "";
      content += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(role, "assistant");
  assert.equal(reasoning, plain.choices[0].message.reasoning_content ?? "");
  assert.equal(content, plain.choices[0].message.content ?? "");
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.deepEqual(usage, plain.usage);
});

await check("thinking off through chat_template_kwargs gives content", async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 4, seed: 1, chat_template_kwargs: { thinking: false },
  });
  assert.equal(r.choices[0].message.reasoning_content, undefined);
  const on = await client.chat.completions.create({ model, messages, max_tokens: 1, seed: 1 });
  assert.ok(on.usage.prompt_tokens !== r.usage.prompt_tokens, "the rendered prompts differ");
});

await check("n=2", async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 3, n: 2, seed: 3, temperature: 1.0,
  });
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1]);
  assert.ok(r.usage.completion_tokens >= 2 && r.usage.completion_tokens <= 6);
});

await check("logprobs (chat)", async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 3, logprobs: true, top_logprobs: 3, temperature: 0,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-4);
  }
});

await check("completions with logprobs, streaming and not", async () => {
  const r = await client.completions.create({
    model, prompt: "The sky is", max_tokens: 4, logprobs: 2, temperature: 0,
  });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].logprobs.tokens.length, r.usage.completion_tokens);
  const s = await client.completions.create({
    model, prompt: "The sky is", max_tokens: 4, temperature: 0, stream: true,
  });
  let text = "";
  for await (const c of s) text += c.choices[0]?.text ?? "";
  assert.equal(text, r.choices[0].text);
});

await check("tool calls round trip", async () => {
  const tools = [{
    type: "function",
    function: {
      name: "get_weather", description: "Weather for a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  }];
  const r = await client.chat.completions.create({
    model, tools, tool_choice: "auto", max_tokens: 4, seed: 2,
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [
        { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: "{\"temp\": 21}" },
    ],
  });
  assert.ok(Array.isArray(r.choices[0].message.tool_calls));
  assert.ok(r.usage.prompt_tokens > 40, "tools and the call are rendered into the prompt");
});

await check("structured outputs are validated", async () => {
  const ok = await client.chat.completions.create({
    model, messages, max_tokens: 2,
    response_format: { type: "json_schema", json_schema: { name: "c", schema: { type: "object", properties: { a: { type: "integer" } } } } },
  });
  assert.equal(ok.choices.length, 1);
  await expectStatus(400, () => client.chat.completions.create({
    model, messages, max_tokens: 2,
    response_format: { type: "json_schema", json_schema: { name: "c", schema: { type: "object", properties: { a: { type: "nonsense" } } } } },
  }), /json_schema/);
  // Enforced while sampling: a random model at temperature 1 still answers inside the schema,
  // for every choice (each has its own matcher), streamed or not.
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model, messages, max_tokens: 40, temperature: 1, seed, n: 2,
      chat_template_kwargs: { thinking: false },
      response_format: { type: "json_schema", json_schema: { name: "yn", schema: { enum: ["yes", "no"] } } },
    });
    for (const c of r.choices) {
      assert.ok(["yes", "no"].includes(JSON.parse(c.message.content)), c.message.content);
      assert.equal(c.finish_reason, "stop");
    }
  }
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 40, temperature: 1, seed: 4, stream: true,
    chat_template_kwargs: { thinking: false },
    structured_outputs: { regex: "[0-9]{3}" },
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  assert.match(text, /^[0-9]{3}$/);
});

await check("errors", async () => {
  await expectStatus(400, () => client.chat.completions.create({ model, messages, max_tokens: 100000 }),
    /maximum context length/);
  await expectStatus(400, () => client.chat.completions.create({ model, messages, max_tokens: 0 }));
  await expectStatus(400, () => client.chat.completions.create({ model, messages, temperature: "hot" }),
    /temperature/);
  await expectStatus(400, () => client.chat.completions.create({ model, messages: [] }), /messages/);
  await expectStatus(404, () => client.chat.completions.create({ model: "nope", messages }));
  const bad = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
  await expectStatus(401, () => bad.models.list());
});

process.exit(failed);
