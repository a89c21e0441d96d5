# syntax=docker/dockerfile:1
# Multi-stage build: compile TypeScript, then a slim runtime with the sandbox and a coding toolset.
# Node 24 (LTS) is the supported runtime of the image (README "Two commands": Node 22 and 24).

FROM node:24-bookworm-slim AS build
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

FROM node:24-bookworm-slim AS runtime
# The gateway needs bubblewrap (the bash sandbox), util-linux (prlimit and setpriv for the sandbox),
# mount (mount and losetup for loop-mounted workspace quotas), e2fsprogs (mkfs.ext4 for those), procps,
# ripgrep (fast grep) and ca-certificates. The rest is what a coding agent's bash expects to find:
# the sandbox binds this image's /usr read-only, so what is installed here is what commands get.
# More tools: a derived image (README "Docker").
RUN apt-get update \
  && apt-get install -y --no-install-recommends \
    bubblewrap util-linux mount e2fsprogs procps ripgrep ca-certificates \
    python3 git curl make jq unzip xz-utils patch less file \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Served at /console by dist/routes/console.js.
COPY --from=build /app/console/dist ./console/dist
# The entrypoint of the compose profile `isolated` (root with the capabilities the full isolation
# needs: cgroups, loop mounts); the default service does not use it.
COPY --chmod=0755 deploy/docker/isolated-entrypoint.sh /usr/local/bin/tool-gateway-isolated
# LOAD_EXAMPLES=false: the example functions and MCP service (current_time, calculate, text_*)
# are the development server's demo tools, not production ones; LOAD_EXAMPLES=true loads them.
ENV NODE_ENV=production \
    PORT=8080 \
    WORKSPACES_DIR=/data/workspaces \
    LOAD_EXAMPLES=false
RUN mkdir -p /data/workspaces && chown -R node:node /data
# Non-root: the sandbox then runs every tenant's commands as this same unprivileged uid, without
# cgroups (README "Docker": the trade-off, and the `isolated` profile that runs as root instead).
USER node
VOLUME ["/data/workspaces"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"]
CMD ["node", "dist/src/server.js"]
