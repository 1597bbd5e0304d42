// Module-resolution hook: adds the "@lanes/source" condition so workspace packages resolve to src/.
// Synchronous, so one function serves both module.registerHooks (whose `next` answers at once) and
// module.register (whose `next` answers a promise, returned as it is).
export function resolve(specifier, context, next) {
  const conditions = context.conditions.includes('@lanes/source') ? context.conditions : ['@lanes/source', ...context.conditions];
  return next(specifier, { ...context, conditions });
}
