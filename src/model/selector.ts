// Kubernetes label selection, as the API server defines it for matchLabels and matchExpressions.
import type { LabelSelector } from '../protocol/validate.ts';

export type Labels = Readonly<Record<string, string>>;

export function selects(selector: LabelSelector, labels: Labels): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const term of selector.matchExpressions ?? []) {
    const present = Object.hasOwn(labels, term.key);
    const value = labels[term.key];
    const values = term.values ?? [];
    switch (term.operator) {
      case 'In':
        if (!present || !values.includes(value ?? '')) return false;
        break;
      case 'NotIn':
        if (present && values.includes(value ?? '')) return false;
        break;
      case 'Exists':
        if (!present) return false;
        break;
      case 'DoesNotExist':
        if (present) return false;
        break;
    }
  }
  return true;
}
