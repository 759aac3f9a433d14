import { pino, type DestinationStream } from "pino";

/**
 * Human-readable lines for a developer (LOG_FORMAT=pretty, which `npm run dev` sets): pino-pretty,
 * a development dependency, loaded only then and never in production, where the lines stay JSON
 * for log collectors. Synchronous, so log lines and console output keep their order.
 */
async function prettyStream(): Promise<DestinationStream | undefined> {
  if (process.env.LOG_FORMAT !== "pretty" || process.env.NODE_ENV === "production") return undefined;
  try {
    const { default: pretty } = await import("pino-pretty");
    return pretty({
      sync: true,
      colorize: process.stdout.isTTY,
      translateTime: "SYS:HH:MM:ss.l",
      ignore: "pid,hostname,name",
    });
  } catch {
    console.warn(
      "[threadline] LOG_FORMAT=pretty needs pino-pretty (a development dependency, not installed here): logging JSON lines",
    );
    return undefined;
  }
}

const pretty = await prettyStream();

/**
 * The app's one logger (JSON lines on stdout, or pretty lines in development). LOG_LEVEL sets the
 * level; under vitest the default is "silent", so a green test run prints nothing and a real failure
 * stands out.
 */
export const logger = pino(
  { name: "threadline", level: process.env.LOG_LEVEL ?? (process.env.VITEST ? "silent" : "info") },
  ...(pretty ? [pretty] : []),
);
