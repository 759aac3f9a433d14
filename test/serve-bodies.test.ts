import { createHmac } from "node:crypto";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inngest } from "../inngest.config.js";
import { INNGEST_MAX_REQUEST_BYTES } from "../src/platform/inngest-serve.js";
import { within } from "./helpers/deadline.js";
import { createTestApp, listen, type Listening } from "./helpers/http.js";
import { useTestBed } from "./helpers/test-bed.js";

// The serve endpoint reads a signed request's body straight from Node's request when its length
// is declared, and through the bounded reader when it is chunked: either way the SDK verifies the
// signature over the body sent and runs the function on it, over real HTTP. In dev mode, where
// nothing is signed, a body is bounded all the same.
const bed = useTestBed();

const SIGNING_KEY = `signkey-test-${"0123456789abcdef".repeat(4)}`;
const double = inngest.createFunction(
  { id: "serve-bodies-double", triggers: [{ event: "test/double" }] },
  async ({ event, step }) => step.run("double", () => (event.data as { n: number }).n * 2),
);

let server: Listening;
let devServer: Listening;
beforeAll(async () => {
  const { app } = createTestApp(bed.db.pool, {
    functions: [double],
    serving: { mode: "cloud", signingKey: SIGNING_KEY },
  });
  server = await listen(app.fetch);
  devServer = await listen(createTestApp(bed.db.pool, { functions: [double], serving: { mode: "dev" } }).app.fetch);
});
afterAll(async () => {
  await server.close();
  await devServer.close();
});

/** JSON with every object's keys sorted and no spaces (RFC 8785, for the values used here): what Inngest signs. */
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : value !== null && typeof value === "object"
      ? `{${Object.keys(value)
          .sort()
          .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
          .join(",")}}`
      : JSON.stringify(value);

/** X-Inngest-Signature for a JSON body: the HMAC of its canonical form and the time. */
const sign = (body: string, at = Math.floor(Date.now() / 1000)) =>
  `t=${at}&s=${createHmac("sha256", SIGNING_KEY.replace(/^signkey-\w+-/, ""))
    .update(canonical(JSON.parse(body)))
    .update(String(at))
    .digest("hex")}`;

/** A run request for the function as Inngest sends one: its event, no memoized steps. */
const runBody = (n: number, padding = "") => {
  const event = { name: "test/double", data: { n, padding }, id: "evt-1", ts: 1_700_000_000_000 };
  return JSON.stringify({
    event,
    events: [event],
    steps: {},
    ctx: {
      run_id: "run-1",
      attempt: 0,
      max_attempts: 1,
      disable_immediate_execution: false,
      use_api: false,
      stack: { stack: [], current: 0 },
    },
  });
};

/** POSTs a body in pieces (chunked, no Content-Length) or whole (with it); answers status and text. */
function post(body: string, signature: string, chunked: boolean): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: server.port,
        method: "POST",
        path: `/api/inngest?fnId=${inngest.id}-serve-bodies-double&stepId=step`,
        headers: {
          "content-type": "application/json",
          "x-inngest-signature": signature,
          ...(chunked ? { "transfer-encoding": "chunked" } : { "content-length": String(Buffer.byteLength(body)) }),
        },
      },
      async (res) => {
        let text = "";
        for await (const chunk of res) text += chunk;
        resolve({ status: res.statusCode ?? 0, text });
      },
    );
    req.once("error", reject);
    if (!chunked) return void req.end(body);
    // Several pieces, so the server reads the body as a stream.
    const piece = Math.ceil(body.length / 4);
    for (let i = 0; i < body.length; i += piece) req.write(body.slice(i, i + piece));
    req.end();
  });
}

describe("the serve endpoint's request bodies (signatures required)", () => {
  for (const chunked of [false, true]) {
    const how = chunked ? "chunked" : "with a declared length";
    it(`runs a signed request sent ${how}, its step's output computed from the body`, async () => {
      // Multi-byte text in the body: the signature covers its UTF-8 bytes.
      const body = runBody(21, "é…✓".repeat(2_000));
      const answer = await post(body, sign(body), chunked);
      expect(answer.status).toBe(206);
      expect(JSON.parse(answer.text)).toMatchObject([{ op: "StepRun", name: "double", data: 42 }]);
    });

    it(`refuses a request sent ${how} whose body is not the one signed`, async () => {
      const answer = await post(runBody(21), sign(runBody(22)), chunked);
      expect(answer.status).toBe(401);
      expect(answer.text).not.toMatch(/"data":42/);
    });
  }

  it("answers 413 to a chunked body larger than Inngest's largest request", async () => {
    const body = "x".repeat(INNGEST_MAX_REQUEST_BYTES + 1);
    const answer = await post(body, sign("{}"), true).catch((error: unknown) => ({ status: 0, text: String(error) }));
    // The connection closes after the answer; the client may see the answer or the reset first.
    if (answer.status !== 0) {
      expect(answer.status).toBe(413);
      expect(JSON.parse(answer.text)).toMatchObject({ code: "too_large" });
    }
    // Whatever the client saw, the server still serves signed requests.
    const ok = runBody(1);
    expect((await post(ok, sign(ok), false)).status).toBe(206);
  });
});

/**
 * POSTs `size` bytes to `to`'s serve endpoint in 1 MiB pieces, chunked or with the length declared,
 * writing no more than `sent` of them; answers the status and text as soon as they come.
 */
function postLarge(
  to: Listening,
  { size, sent = size, chunked }: { size: number; sent?: number; chunked: boolean },
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = request(
      {
        host: "127.0.0.1",
        port: to.port,
        method: "POST",
        path: "/api/inngest",
        headers: {
          "content-type": "application/json",
          ...(chunked ? { "transfer-encoding": "chunked" } : { "content-length": String(size) }),
        },
      },
      async (res) => {
        answered = true;
        let text = "";
        for await (const chunk of res) text += chunk;
        resolve({ status: res.statusCode ?? 0, text });
        req.destroy();
      },
    );
    req.once("error", (error) => (answered ? undefined : reject(error)));
    const piece = Buffer.alloc(1024 * 1024, 0x20);
    let written = 0;
    const write = () => {
      while (!answered && written < sent) {
        const next = piece.subarray(0, Math.min(piece.length, sent - written));
        written += next.length;
        if (!req.write(next)) return void req.once("drain", write);
      }
      if (!answered && chunked) req.end();
    };
    write();
  });
}

describe("the serve endpoint's request bodies in dev mode (no signatures)", () => {
  const size = 50 * 1024 * 1024;

  it("answers 413 to a chunked body larger than Inngest's largest request", async () => {
    const answer = await within(postLarge(devServer, { size, chunked: true }), "the answer to a 50 MB chunked body");
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.text)).toMatchObject({ code: "too_large" });
  });

  it("answers 413 to a declared length over the limit while the client has sent only its first bytes", async () => {
    const answer = await within(
      postLarge(devServer, { size, sent: 64 * 1024, chunked: false }),
      "the answer to a declared 50 MB body of which 64 KiB were sent",
    );
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.text)).toMatchObject({ code: "too_large" });
  });
});
