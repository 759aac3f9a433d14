FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm install --no-save tsx
COPY . .
ENV PORT=3000
EXPOSE 3000
CMD ["npx", "tsx", "src/server.ts"]
