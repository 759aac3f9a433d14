import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { chooseStartModel, MODEL_SETUP_STEPS, probeOllama } from "../src/agents/model.js";
import { readEnvironment } from "../src/config.js";
import { createChatTurn } from "../src/functions/chat-turn.js";
import { freePort } from "../src/platform/database.js";
import { execute } from "./helpers/engine.js";
import { chatEvent } from "./helpers/fixtures.js";
import { useTestBed } from "./helpers/test-bed.js";

/**
 * A stand-in for a local Ollama on loopback: its OpenAI-compatible model list (GET /v1/models)
 * and chat completions (answered with `reply`), every request recorded. `models: "hang"` never
 * answers the list.
 */
async function startOllamaStandIn({
  models,
  reply = "Hello from the local model.",
}: {
  models: string[] | "hang";
  reply?: string;
}) {
  const requests: { method: string; url: string; body: string }[] = [];
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    requests.push({ method: req.method!, url: req.url!, body });
    if (req.method === "GET" && req.url === "/v1/models") {
      if (models === "hang") return;
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          object: "list",
          data: models.map((id) => ({ id, object: "model", created: 0, owned_by: "library" })),
        }),
      );
      return;
    }
    if (req.method === "POST" && req.url === "/v1/chat/completions") {
      const { model } = JSON.parse(body) as { model: string };
      const message = { role: "assistant", content: reply };
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          id: "chatcmpl-1",
          object: "chat.completion",
          created: 0,
          model,
          choices: [{ index: 0, message, finish_reason: "stop" }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function readBody(req: IncomingMessage) {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** No provider configured (empty values count as unset, and a .env file never overrides them). */
const NO_PROVIDER = { OPENAI_API_KEY: "", OPENAI_BASE_URL: "", ANTHROPIC_API_KEY: "", GEMINI_API_KEY: "", MODEL: "" };

const bed = useTestBed();
const standIns: { close: () => Promise<void> }[] = [];
const standIn = async (options: Parameters<typeof startOllamaStandIn>[0]) => {
  const started = await startOllamaStandIn(options);
  standIns.push(started);
  return started;
};
afterAll(async () => {
  await Promise.all(standIns.map((server) => server.close()));
});

describe("choosing the model at start-up, with no provider configured", () => {
  it("in development, uses a local Ollama that answers on OLLAMA_BASE_URL: the first model it lists, through its OpenAI-compatible API; a chat turn gets its answer from it", async () => {
    const ollama = await standIn({ models: ["llama3.2:latest", "qwen2.5:0.5b"] });
    const { choice, note } = await chooseStartModel(readEnvironment({ ...NO_PROVIDER, OLLAMA_BASE_URL: ollama.url }));
    expect(choice).toMatchObject({ configured: true, provider: "openai", name: "llama3.2:latest", source: "ollama" });
    expect(note).toBe(
      `no provider is configured, so the local Ollama at ${ollama.url} answers (MODEL picks another of its models: qwen2.5:0.5b)`,
    );
    expect(ollama.requests.map((request) => `${request.method} ${request.url}`)).toEqual(["GET /v1/models"]);

    const { error, result } = await execute(
      createChatTurn({ db: bed.db.pool, model: choice }),
      chatEvent({ content: "Hello?" }),
    );
    expect(error).toBeUndefined();
    const inference = ollama.requests.at(-1)!;
    expect(`${inference.method} ${inference.url}`).toBe("POST /v1/chat/completions");
    expect(JSON.parse(inference.body)).toMatchObject({
      model: "llama3.2:latest",
      messages: expect.arrayContaining([expect.objectContaining({ role: "user", content: "Hello?" })]),
    });
    expect(JSON.stringify(result)).toContain("Hello from the local model.");
  });

  it("takes MODEL when it is set, and asks nothing of Ollama when a provider is configured or in production", async () => {
    const ollama = await standIn({ models: ["llama3.2:latest", "qwen2.5:0.5b"] });
    const picked = await chooseStartModel(
      readEnvironment({ ...NO_PROVIDER, MODEL: "qwen2.5:0.5b", OLLAMA_BASE_URL: ollama.url }),
    );
    expect(picked.choice).toMatchObject({ configured: true, name: "qwen2.5:0.5b", source: "ollama" });
    const requestsBefore = ollama.requests.length;

    const keyed = await chooseStartModel(readEnvironment({ OPENAI_API_KEY: "sk-test", OLLAMA_BASE_URL: ollama.url }));
    expect(keyed).toEqual({
      choice: expect.objectContaining({ configured: true, name: "gpt-4o-mini", source: "environment" }),
    });
    const production = await chooseStartModel(
      readEnvironment({ ...NO_PROVIDER, NODE_ENV: "production", OLLAMA_BASE_URL: ollama.url }),
    );
    expect(production.choice.configured).toBe(false);
    expect(ollama.requests.length).toBe(requestsBefore);
  });

  it("says what it found instead: nothing listening, an Ollama without models, a port that never answers", async () => {
    const closedPort = await freePort();
    const nothing = await chooseStartModel(
      readEnvironment({ ...NO_PROVIDER, OLLAMA_BASE_URL: `http://127.0.0.1:${closedPort}` }),
    );
    expect(nothing.choice.configured).toBe(false);
    expect(nothing.note).toBe(`no local Ollama either (nothing answered at http://127.0.0.1:${closedPort}/v1/models)`);

    const empty = await standIn({ models: [] });
    const { choice } = await chooseStartModel(readEnvironment({ ...NO_PROVIDER, OLLAMA_BASE_URL: empty.url }));
    expect(choice).toMatchObject({
      configured: false,
      reason: expect.stringMatching(
        new RegExp(`^A local Ollama answers at ${empty.url} but has no model: run \`ollama pull llama3.2\``),
      ),
    });

    const hung = await standIn({ models: "hang" });
    expect(await probeOllama(hung.url, 200)).toEqual({
      found: false,
      why: `no answer within 200 ms at ${hung.url}/v1/models`,
    });
  });
});

describe("the server's start, as `npm run dev` starts it (a child process)", () => {
  let child: ChildProcess | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null) {
      child.kill("SIGKILL");
      await once(child, "exit");
    }
    child = undefined;
  });

  /** Starts src/main.ts with `env` on the test database; resolves once /health answers, with its output so far. */
  async function startServer(env: Record<string, string>) {
    const port = await freePort();
    const started = spawn(process.execPath, ["--import", "tsx", path.resolve("src/main.ts")], {
      env: {
        ...process.env,
        ...NO_PROVIDER,
        INNGEST_DEV: "1",
        AUTH: "dev",
        LOG_LEVEL: "info",
        DATABASE_URL: bed.db.url,
        PORT: String(port),
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = started;
    let output = "";
    started.stdout?.on("data", (chunk) => (output += chunk));
    started.stderr?.on("data", (chunk) => (output += chunk));
    const url = `http://127.0.0.1:${port}`;
    for (;;) {
      if (started.exitCode !== null) throw new Error(`the server exited during start-up:\n${output}`);
      if (
        await fetch(`${url}/health`).then(
          (response) => response.ok,
          () => false,
        )
      )
        break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const info = await (await fetch(`${url}/api/info`, { headers: { "X-Threadline-User": "newcomer" } })).json();
    return { output: () => output, info };
  }

  it("finds the local Ollama, says so in the log, and GET /api/info names its model", async () => {
    const ollama = await standIn({ models: ["llama3.2:latest"] });
    const { output, info } = await startServer({ OLLAMA_BASE_URL: ollama.url });
    expect(output()).toContain(
      `model: openai llama3.2:latest: no provider is configured, so the local Ollama at ${ollama.url} answers`,
    );
    expect(info).toEqual({
      model: { configured: true, provider: "openai", name: "llama3.2:latest", source: "ollama" },
      inference: "gateway",
    });
  }, 90_000);

  it("without a provider or an Ollama, logs exactly how to configure a model, and GET /api/info says the same", async () => {
    const closedPort = await freePort();
    const { output, info } = await startServer({ OLLAMA_BASE_URL: `http://127.0.0.1:${closedPort}` });
    expect(output()).toContain(`no local Ollama either (nothing answered at http://127.0.0.1:${closedPort}/v1/models)`);
    for (const step of MODEL_SETUP_STEPS) expect(output()).toContain(JSON.stringify(step).slice(1, -1));
    expect(info).toEqual({
      model: { configured: false, problem: expect.stringMatching(/^No model is configured/), setup: MODEL_SETUP_STEPS },
      inference: "gateway",
    });
  }, 90_000);
});
