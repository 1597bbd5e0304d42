// Module-resolution hook: adds the "@lanes/source" condition so workspace packages resolve to src/.
export async function resolve(specifier, context, next) {
  const conditions = context.conditions.includes('@lanes/source') ? context.conditions : ['@lanes/source', ...context.conditions];
  return next(specifier, { ...context, conditions });
}
