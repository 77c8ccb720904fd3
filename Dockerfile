# syntax=docker/dockerfile:1
# One image for the three processes (API, worker, mock provider) and the
# migration job; compose picks the command. It carries src/ and migrations/
# compiled, nothing else. The `tools` target adds the compiled scripts (the
# demo, the audit) for `docker compose run --rm demo`.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build:production

# The production build and the tools (scripts/, the test harness they start,
# and the client library, which npm run build builds and the demo,
# client:budget and chaos run);
# built only for the tools target.
FROM build AS tools-build
COPY tsconfig.tools.json ./
COPY scripts ./scripts
COPY test/support ./test/support
COPY client ./client
RUN npm run build

FROM node:24-bookworm-slim AS base
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# A fresh install of the production dependencies alone: none of the build's
# tools reach this stage. npm keeps typescript under --omit=dev because
# @nestjs/swagger names it an optional peer, for its compile-time plugin, which
# nothing here runs; so it goes too.
RUN npm ci --omit=dev --no-audit --no-fund \
  && rm -rf node_modules/typescript \
  && npm cache clean --force
# The mock provider's journal lives here (a volume in compose).
RUN mkdir -p /data && chown node:node /data
USER node

# The runtime image with the demo and the audit beside it, to run inside the
# compose network (compose's demo service); never deployed. The demo pays
# through the client library, as built (client/dist, ES modules, which its
# package.json says).
FROM base AS tools
COPY --from=tools-build /app/dist ./dist
COPY --from=tools-build /app/client/package.json ./client/package.json
COPY --from=tools-build /app/client/dist ./client/dist
CMD ["node", "dist/scripts/demo.js"]

# The runtime image, the default target.
FROM base AS runtime
COPY --from=build /app/dist ./dist
EXPOSE 3000 4010
# The API's liveness; compose overrides it for the worker and the provider.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health/live').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The API's heap settings: src/config/api-node-flags.ts says why.
CMD ["node", "--max-semi-space-size=4", "--max-old-space-size=128", "dist/src/main.js"]
