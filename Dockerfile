# One image for every part: `lanes api`, `lanes worker`, `lanes supervisor` or `lanes up`.
# Runs from TypeScript source through tsx (a runtime dependency), so there is no build stage to drift.
# Node 26 is the Active LTS (20 left support in April 2026; Modal's JS SDK needs 22 or newer).
FROM node:26-bookworm-slim

# git: the demo agent and most real agents work on repositories. util-linux: `unshare` gives each
# local sandbox its own PID namespace where the container is allowed to (it falls back otherwise).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git util-linux ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json ./
COPY libs/contracts/package.json libs/contracts/
COPY libs/client/package.json libs/client/
COPY libs/sandbox/package.json libs/sandbox/
COPY libs/supervision/package.json libs/supervision/
COPY libs/queue/package.json libs/queue/
COPY libs/runner/package.json libs/runner/
COPY apps/api/package.json apps/api/
COPY apps/worker/package.json apps/worker/
COPY apps/supervisor/package.json apps/supervisor/
COPY apps/cli/package.json apps/cli/
RUN npm ci --omit=dev --no-audit --no-fund

COPY tsconfig.base.json ./
COPY libs libs
COPY apps apps

ENV NODE_ENV=production \
    LANES_SANDBOX_DIR=/var/lib/lanes/sandboxes \
    LANES_PORT=3000
# Not root: the image's unprivileged `node` user (uid 1000) owns only what lanes writes: the
# sandboxes' directory and `.lanes/` (local state); the code stays root's, read-only to it.
RUN mkdir -p /var/lib/lanes/sandboxes /app/.lanes && chown node:node /var/lib/lanes/sandboxes /app/.lanes
USER node
EXPOSE 3000
ENTRYPOINT ["node", "apps/cli/bin/lanes.js"]
CMD ["up"]
