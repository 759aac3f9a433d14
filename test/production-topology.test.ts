import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { readEnvironment } from "../src/config.js";
import { inngestEngine } from "../src/platform/inngest-engine.js";
import { startupRefusals } from "../src/platform/production.js";

/**
 * docker-compose.production.yml as far as this machine can check it (no Docker here): parsed, its
 * variables substituted as Compose does, and each service's configuration checked against what
 * the app refuses to start without (src/platform/production.ts) and against the other services.
 */
const COMPOSE = readFileSync("docker-compose.production.yml", "utf8");
const HAPROXY = readFileSync("deploy/haproxy.cfg", "utf8");

/** What an operator sets (the file's header lists it). */
const operatorEnvironment = {
  INNGEST_SIGNING_KEY_HEX: "5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592",
  INNGEST_EVENT_KEY: "a1b2c3d4e5f60718293a4b5c6d7e8f90",
  POSTGRES_PASSWORD: "app-secret",
  INNGEST_POSTGRES_PASSWORD: "inngest-secret",
  AUTH_JWKS_URL: "https://login.example.test/.well-known/jwks.json",
  AUTH_JWT_ISSUER: "https://login.example.test/",
  AUTH_JWT_AUDIENCE: "threadline-api",
  OPENAI_API_KEY: "sk-test",
};

/** Compose's interpolation: ${NAME}, ${NAME:-default}, ${NAME:?error} (unset or empty), $$. */
function interpolate(text: string, env: Record<string, string | undefined>): string {
  return text.replace(
    /\$\$|\$\{(\w+)(?::([-?])([^}]*))?\}/g,
    (match, name: string | undefined, kind: string | undefined, arg: string | undefined) => {
      if (match === "$$") return "$";
      const value = env[name!];
      if (value !== undefined && value !== "") return value;
      if (kind === "?") throw new Error(`${name}: ${arg}`);
      return kind === "-" ? arg! : "";
    },
  );
}

type Service = {
  image?: string;
  build?: string;
  command?: string | string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
};
const composeWith = (env: Record<string, string | undefined>) =>
  parse(interpolate(COMPOSE, env)) as { services: Record<string, Service> };

const { services } = composeWith(operatorEnvironment);
const apps = Object.entries(services).filter(([, service]) => service.build === ".");
const argsOf = (service: Service) => (Array.isArray(service.command) ? service.command : service.command!.split(/\s+/));
const flag = (args: string[], name: string) => args[args.indexOf(name) + 1];
const inngestArgs = argsOf(services.inngest!);
/** A container's environment: a variable left without a value (`KEY:`, an unset ${KEY:-}) is unset in it. */
const envOf = (service: Service) =>
  Object.fromEntries(
    Object.entries(service.environment ?? {}).flatMap(([key, value]) => (value === null ? [] : [[key, String(value)]])),
  );

describe("docker-compose.production.yml", () => {
  it("runs two app replicas, each configured as production mode requires: nothing refused at start-up", () => {
    expect(apps.map(([name]) => name)).toEqual(["app1", "app2"]);
    for (const [, app] of apps) {
      const env = readEnvironment(envOf(app));
      expect(env.NODE_ENV).toBe("production");
      expect(startupRefusals(env)).toEqual([]);
    }
  });

  it("refuses to render without the operator's secrets, naming each", () => {
    for (const name of [
      "INNGEST_SIGNING_KEY_HEX",
      "INNGEST_EVENT_KEY",
      "POSTGRES_PASSWORD",
      "INNGEST_POSTGRES_PASSWORD",
    ]) {
      expect(() => composeWith({ ...operatorEnvironment, [name]: undefined }), name).toThrow(
        new RegExp(`^${name}: set ${name}`),
      );
    }
  });

  it("derives both sides' keys from one secret: the server's bare hex signing key, the app's signkey-prod-<same hex>; one event key", () => {
    expect(inngestArgs.slice(0, 2)).toEqual(["inngest", "start"]);
    const serverKey = flag(inngestArgs, "--signing-key")!;
    expect(serverKey).toMatch(/^[0-9a-f]+$/);
    expect(serverKey.length % 2).toBe(0);
    for (const [, app] of apps) {
      expect(app.environment!.INNGEST_SIGNING_KEY).toBe(`signkey-prod-${serverKey}`);
      expect(app.environment!.INNGEST_EVENT_KEY).toBe(flag(inngestArgs, "--event-key"));
    }
  });

  it("points the app at the self-hosted server, and the server at the app through the load balancer", () => {
    const port = flag(inngestArgs, "--port");
    for (const [, app] of apps) {
      const env = readEnvironment(envOf(app));
      expect(inngestEngine(env)).toMatchObject({
        kind: "self-hosted",
        eventUrl: `http://inngest:${port}`,
        apiUrl: `http://inngest:${port}`,
      });
      expect(flag(inngestArgs, "-u")).toBe(
        `${app.environment!.INNGEST_SERVE_ORIGIN}${app.environment!.INNGEST_SERVE_PATH}`,
      );
      expect(new URL(env.DATABASE_URL!).hostname).toBe("postgres");
    }
    expect(new URL(flag(inngestArgs, "-u")!).host).toBe(`lb:${/bind :(\d+)/.exec(HAPROXY)![1]}`);
  });

  it("keeps Inngest's state durable and apart: its own PostgreSQL, a Redis that appends to disk; no dashboard", () => {
    expect(new URL(flag(inngestArgs, "--postgres-uri")!).hostname).toBe("inngest-postgres");
    expect(services["inngest-postgres"]!.volumes).toEqual([expect.stringMatching(/:\/var\/lib\/postgresql\/data$/)]);
    expect(new URL(flag(inngestArgs, "--redis-uri")!).hostname).toBe("redis");
    const redis = argsOf(services.redis!);
    expect(flag(redis, "--appendonly")).toBe("yes");
    expect(services.redis!.volumes).toEqual([expect.stringMatching(/:\/data$/)]);
    expect(inngestArgs).toContain("--no-ui");
  });

  it("publishes only the load balancer, which balances over both replicas, retries on connection failure and checks readiness", () => {
    expect(
      Object.entries(services)
        .filter(([, service]) => service.ports)
        .map(([name]) => name),
    ).toEqual(["lb"]);
    expect(services.lb!.volumes).toEqual(["./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro"]);
    const servers = [...HAPROXY.matchAll(/^\s*server (\S+) (\S+):(\d+)/gm)].map(([, name, host, port]) => ({
      name,
      host,
      port,
    }));
    expect(servers).toEqual(apps.map(([name, app]) => ({ name, host: name, port: app.environment!.PORT })));
    expect(HAPROXY).toMatch(/^\s*retry-on conn-failure$/m);
    expect(HAPROXY).toMatch(/^\s*option httpchk GET \/health\/ready$/m);
  });
});

describe("npm run sync (scripts/sync.ts)", () => {
  let app: Server;
  let url: string;
  const received: string[] = [];
  let answer = { status: 200, body: JSON.stringify({ message: "Successfully registered", modified: true }) };

  beforeAll(async () => {
    app = createServer((request, response) => {
      received.push(`${request.method} ${request.url}`);
      response.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body);
    });
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => app.close(() => resolve())));

  const sync = (args: string[], env: Record<string, string> = {}) =>
    promisify(execFile)(process.execPath, ["--import", "tsx", path.resolve("scripts/sync.ts"), ...args], {
      env: { PATH: process.env.PATH, ...env },
    }).then(
      ({ stdout }) => ({ code: 0, out: stdout }),
      (error: { code: number; stderr: string }) => ({ code: error.code, out: error.stderr }),
    );

  it("--help says what it does and exits 0", async () => {
    const { code, out } = await sync(["--help"]);
    expect(code).toBe(0);
    expect(out).toMatch(/^Usage: node dist\/scripts\/sync\.js/);
    expect(received).toEqual([]);
  });

  it("PUTs the serve endpoint named by INNGEST_SERVE_ORIGIN and INNGEST_SERVE_PATH, printing the SDK's answer", async () => {
    const { code, out } = await sync([], { INNGEST_SERVE_ORIGIN: `${url}/`, INNGEST_SERVE_PATH: "/api/inngest" });
    expect({ code, out }).toEqual({
      code: 0,
      out: `[threadline] synced: PUT ${url}/api/inngest: Successfully registered\n`,
    });
    expect(received).toEqual(["PUT /api/inngest"]);
  });

  it("exits 1 with the SDK's reason when the server refused the app (e.g. a wrong signing key)", async () => {
    answer = { status: 500, body: JSON.stringify({ message: "Failed to register: unauthorized", modified: false }) };
    const { code, out } = await sync(["--url", `${url}/custom/inngest`]);
    expect(code).toBe(1);
    expect(out).toBe(
      `[threadline] sync failed: PUT ${url}/custom/inngest answered HTTP 500: Failed to register: unauthorized\n`,
    );
    expect(received.at(-1)).toBe("PUT /custom/inngest");
  });
});

describe("production start-up refusals name the fix for self-hosted Inngest too", () => {
  const [, replica] = apps[0]!;
  const refusalsWith = (changes: Record<string, string | undefined>) =>
    startupRefusals(readEnvironment({ ...envOf(replica), ...changes }));

  it("the server's bare hex key given to the app: refused, saying to prefix it with signkey-prod-", () => {
    expect(refusalsWith({ INNGEST_SIGNING_KEY: operatorEnvironment.INNGEST_SIGNING_KEY_HEX })).toEqual([
      "INNGEST_SIGNING_KEY is not in the SDK's format signkey-<env>-<hex>: for self-hosted Inngest, prefix the server's hex key (inngest start --signing-key) with signkey-prod-.",
    ]);
  });

  it("missing keys: where to find them on Inngest Cloud and on a self-hosted server", () => {
    expect(refusalsWith({ INNGEST_SIGNING_KEY: undefined })).toEqual([
      expect.stringMatching(
        /Inngest Cloud: Manage > Signing Key; self-hosted: signkey-prod-<the hex key given to inngest start --signing-key>\)\.$/,
      ),
    ]);
    expect(refusalsWith({ INNGEST_EVENT_KEY: undefined })).toEqual([
      expect.stringMatching(
        /Inngest Cloud: Manage > Event Keys; self-hosted: one of the keys given to inngest start --event-key\)\.$/,
      ),
    ]);
  });
});
