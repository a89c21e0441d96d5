# syntax=docker/dockerfile:1
# Multi-stage build: compile TypeScript, then a slim runtime with bubblewrap and ripgrep.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# npm ci runs the prepare script, which builds the web console (console/ -> console/dist).
COPY scripts/build-console.mjs ./scripts/
COPY console ./console
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY plugins ./plugins
COPY routes ./routes
COPY examples ./examples
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim AS runtime
# bubblewrap: the bash sandbox; ripgrep: fast grep; util-linux: prlimit for sandbox rlimits.
RUN apt-get update \
  && apt-get install -y --no-install-recommends bubblewrap ripgrep util-linux ca-certificates \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Served at /console by dist/routes/console.js.
COPY --from=build /app/console/dist ./console/dist
ENV NODE_ENV=production \
    PORT=8080 \
    WORKSPACES_DIR=/data/workspaces
RUN mkdir -p /data/workspaces && chown -R node:node /data
# Non-root: the sandbox then runs commands as this same unprivileged uid.
USER node
VOLUME ["/data/workspaces"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"]
CMD ["node", "dist/src/server.js"]
