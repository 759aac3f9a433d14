import { pino } from "pino";

/**
 * The app's one logger (JSON lines on stdout). LOG_LEVEL sets the level; under vitest the default
 * is "silent", so a green test run prints nothing and a real failure stands out.
 */
export const logger = pino({
  name: "threadline",
  level: process.env.LOG_LEVEL ?? (process.env.VITEST ? "silent" : "info"),
});
