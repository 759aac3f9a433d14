// First: the settings of .env, before any module reads the environment.
import "../src/platform/env-file.js";
import { createHmac } from "node:crypto";
import { parseArgs } from "node:util";
import { readEnvironment } from "../src/config.js";
import { DEFAULT_SERVE_PATH } from "../src/platform/inngest-serve.js";

/**
 * npm run sync — registers the app's functions with its Inngest server after a deploy: a PUT to the
 * app's serve endpoint, which makes the SDK send the functions it serves now to the server it is
 * configured for (INNGEST_BASE_URL, or Inngest Cloud), signed with its signing key. Without it a
 * self-hosted server keeps running the functions of the previous deploy (Inngest Cloud can also
 * sync through its Vercel/Netlify integrations or the dashboard).
 */
const HELP = `Usage: node dist/scripts/sync.js [--url <serve URL>]   (npm run sync [-- --url <serve URL>])

Registers Threadline's functions with the Inngest server after a deploy (PUT <serve URL>).
Signed with INNGEST_SIGNING_KEY when it is set: production refuses an unsigned sync.

  --url <serve URL>  the app's Inngest endpoint, as the Inngest server reaches it
                     (default: INNGEST_SERVE_ORIGIN + INNGEST_SERVE_PATH when set,
                     else http://127.0.0.1:$PORT/api/inngest)
  --help             this text

Exit status 0 when the server accepted the app, 1 otherwise (the SDK's answer is printed).`;

const { values } = parseArgs({ options: { url: { type: "string" }, help: { type: "boolean" } } });
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

/**
 * Production refuses an unsigned sync (src/platform/inngest-serve.ts): with the app's signing key the PUT
 * is signed as Inngest signs its requests, an HMAC-SHA256 of the (empty) body and the time, keyed
 * by the key without its signkey-<env>- prefix.
 */
function signature(signingKey: string | undefined): Record<string, string> {
  if (!signingKey) return {};
  const at = String(Math.floor(Date.now() / 1000));
  const hex = createHmac("sha256", signingKey.replace(/^signkey-\w+-/, ""))
    .update("")
    .update(at)
    .digest("hex");
  return { "X-Inngest-Signature": `t=${at}&s=${hex}` };
}

// The serve URL as the app announces it (src/platform/inngest-serve.ts), from the same validated settings.
const env = readEnvironment();
const url =
  values.url ??
  `${env.INNGEST_SERVE_ORIGIN ?? `http://127.0.0.1:${env.PORT}`}${env.INNGEST_SERVE_PATH ?? DEFAULT_SERVE_PATH}`;

try {
  const response = await fetch(url, {
    method: "PUT",
    headers: signature(env.INNGEST_SIGNING_KEY),
    signal: AbortSignal.timeout(30_000),
  });
  const body = await response.text();
  let message = body;
  try {
    message = (JSON.parse(body) as { message?: string }).message ?? body;
  } catch {
    // Not the SDK's JSON (a proxy's error page): printed as it came.
  }
  if (!response.ok) {
    console.error(`[threadline] sync failed: PUT ${url} answered HTTP ${response.status}: ${message.slice(0, 2_000)}`);
    process.exit(1);
  }
  console.log(`[threadline] synced: PUT ${url}: ${message}`);
} catch (error) {
  console.error(
    `[threadline] sync failed: PUT ${url}: ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}. Is the app running and reachable at that URL?`,
  );
  process.exit(1);
}
