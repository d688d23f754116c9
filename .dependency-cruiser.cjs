// The layering of the code, checked by `npm run lint:layers` and tests/layering.test.ts.
// Rooms: handlers/ (one module per operation group), lib/ (services and the platform),
// db/ (SQLite repositories returning rows), generated/ (the contract's types).
// Violations that stand today and are to be removed are in
// .dependency-cruiser-known-violations.json: they are reported but do not fail; any other does.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules do not import each other in a circle.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'db-returns-rows',
      severity: 'error',
      comment:
        "db/ imports nothing from lib/, handlers/ or generated/ but the ports it implements (lib/ports.ts, lib/*/ports.ts: the types and constants they speak in) and the cache registry (lib/platform/cache.ts: not storage, it imports nothing of the project, and the storage's caches are made in it): db/ returns rows; mapping them into answers is lib/'s.",
      from: { path: '^db/' },
      to: { path: '^(lib|handlers|generated)/', pathNot: ['^lib/ports\\.ts$', '^lib/[^/]+/ports\\.ts$', '^lib/platform/cache\\.ts$'] },
    },
    {
      name: 'features-import-no-storage',
      severity: 'error',
      comment:
        "A feature (lib/<feature>/, its wiring included) imports nothing from db/: it speaks through its ports (lib/<feature>/ports.ts), which declare the rows, filters and constants db/ implements them with. The composition roots (lib/services.ts, lib/repos.ts, lib/repos-postgres.ts, lib/platform/storage.ts) give it the implementations.",
      from: { path: '^lib/(?!platform/)[^/]+/' },
      to: { path: '^db/' },
    },
    {
      name: 'event-engine-one-entry',
      severity: 'error',
      comment: 'The event engine (db/event-engine/) is entered through its index.ts only: its parts are free to change behind it.',
      from: { path: '^(db|lib|handlers)/', pathNot: '^db/event-engine/' },
      to: { path: '^db/event-engine/', pathNot: '^db/event-engine/index\\.ts$' },
    },
    {
      name: 'only-app-wiring-imports-handlers',
      severity: 'error',
      comment: 'Only the app wiring (lib/app.ts, which registers the handlers with fastify-openapi-glue) imports handlers/.',
      from: { path: '^(lib|db|generated|client|examples|scripts)/', pathNot: '^lib/app\\.ts$' },
      to: { path: '^handlers/' },
    },
    {
      name: 'handlers-go-through-services',
      severity: 'error',
      comment: 'handlers/ do not import db/: they call the services and repositories they are given.',
      from: { path: '^handlers/' },
      to: { path: '^db/' },
    },
    {
      name: 'services-take-plain-inputs',
      severity: 'error',
      comment:
        "A feature's services, ports, rules and views (lib/<feature>/) take plain inputs, not Fastify's request or instance: only the feature's wiring (lib/<feature>/index.ts) may import fastify.",
      from: { path: '^lib/(?!platform/)[^/]+/', pathNot: '^lib/[^/]+/index\\.ts$' },
      to: { path: '(^|/)node_modules/fastify/' },
    },
    {
      name: 'platform-imports-no-feature',
      severity: 'error',
      comment:
        "The platform (lib/platform/ and the shared lib/*.ts) imports no feature (lib/<feature>/): a feature registers with it or takes it as a dependency. The composition roots (lib/app.ts, lib/services.ts, lib/repos.ts, lib/repos-postgres.ts, lib/server.ts, and lib/reader-thread.ts, a reader thread's) wire the features and may; the platform's part of the wiring (lib/platform/storage.ts, say) may name a feature's port types only (next rule).",
      from: { path: '^lib/(platform/|[^/]+\\.ts$)', pathNot: '^lib/(app|services|repos|repos-postgres|server|reader-thread)\\.ts$' },
      to: { path: '^lib/(?!platform/)[^/]+/', pathNot: '^lib/[^/]+/ports\\.ts$' },
    },
    {
      name: 'platform-names-feature-ports-as-types-only',
      severity: 'error',
      comment: "The platform may name a feature's ports (lib/<feature>/ports.ts) as types, to say what the storage it opens provides; it imports no value from them.",
      from: { path: '^lib/(platform/|[^/]+\\.ts$)', pathNot: '^lib/(app|services|repos|repos-postgres|server|reader-thread)\\.ts$' },
      to: { path: '^lib/(?!platform/)[^/]+/ports\\.ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'handlers-import-no-wiring',
      severity: 'error',
      comment: "A handler imports services, views and rules, never a feature's wiring (lib/<feature>/index.ts: its decorators, loops and Fastify plugins).",
      from: { path: '^handlers/' },
      to: { path: '^lib/(?!platform/)[^/]+/index\\.ts$' },
    },
    {
      name: 'features-import-no-other-service',
      severity: 'error',
      comment: "A feature imports another feature's views and rules, never its service: services meet in the wiring (lib/services.ts), which gives one to another as a dependency.",
      from: { path: '^lib/((?!platform/)[^/]+)/' },
      to: { path: '^lib/[^/]+/service\\.ts$', pathNot: '^lib/$1/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|tests|coverage)/' },
    // Type-only imports count: a db/ module that names a generated type depends on it.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
    },
  },
}
