export interface ValidationIssue {
  /** Dotted path of the offending field, e.g. `pr.number` or `lanes.0.agent`. */
  path: string;
  message: string;
}

export function describeIssues(issues: readonly ValidationIssue[]): string {
  return issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
}
