# Threadline: compiled JavaScript on plain node, production dependencies only, non-root, under tini.
#   docker build -t threadline .      docker run -p 3000:3000 -e DATABASE_URL=... threadline
# Operator commands run from the image on plain node (compiled into dist/scripts by npm run build):
#   docker run --rm -e DATABASE_URL=... threadline node dist/scripts/api-keys.js create --user U --name N

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json inngest.config.ts ./
COPY src ./src
COPY scripts ./scripts
RUN npm run build

FROM node:20-bookworm-slim AS runtime
# tini as PID 1: forwards SIGTERM to node (which drains: SHUTDOWN_TIMEOUT_MS in docs/configuration.md) and reaps orphans.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    PORT=3000
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The embedded database (used only when DATABASE_URL is unset) keeps its data here.
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "--enable-source-maps", "--max-semi-space-size=32", "dist/src/main.js"]
