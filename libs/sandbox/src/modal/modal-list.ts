import type { SandboxTags } from '@lanes/contracts';
import type { SandboxRef } from '../provider.js';
import type { ModalControlPlaneLike } from './modal-client.js';

/**
 * Lists running sandboxes of one app that carry at least `want`, with their tags, in one
 * `SandboxListV2` call per page.
 *
 * Why not `client.sandboxes.list()`: in modal@0.11.1 it yields bare `Sandbox` objects (ids only)
 * although every `SandboxInfo` on the wire carries its tags, so a sweep would pay one
 * `SandboxTagsGetV2` per sandbox (N+1 calls). The SDK's own list is a thin loop over
 * `client.cpClient.sandboxListV2` (the control-plane stub every SDK call goes through, with the
 * SDK's auth, retry and timeout middleware), so we run the same loop on the same stub and keep
 * the tags: the same request, the same paging (older pages by `beforeTimestamp` until an empty
 * page), the same `includeFinished: false`. `cpClient` is a public, typed member of `ModalClient`
 * (marked `@ignore` in its docs): an SDK upgrade must re-check this loop against the SDK's
 * `experimentalList`.
 */
export async function listByTags(cp: ModalControlPlaneLike, appId: string, want: Record<string, string>): Promise<SandboxRef[]> {
  const tags = Object.entries(want).map(([tagName, tagValue]) => ({ tagName, tagValue }));
  const refs: SandboxRef[] = [];
  let beforeTimestamp: number | undefined;
  for (;;) {
    const page = await cp.sandboxListV2({ appId, includeFinished: false, tags, ...(beforeTimestamp !== undefined ? { beforeTimestamp } : {}) });
    const sandboxes = page.sandboxes ?? [];
    if (sandboxes.length === 0) return refs;
    for (const info of sandboxes) refs.push({ id: info.id, tags: laneTags(info.tags) });
    beforeTimestamp = sandboxes[sandboxes.length - 1]!.createdAt;
  }
}

/** Only tags lanes owns are reported, so an unrelated tag cannot pose as an owner. */
function laneTags(list: ReadonlyArray<{ tagName: string; tagValue: string }>): Partial<SandboxTags> {
  const tags = new Map(list.map((t) => [t.tagName, t.tagValue]));
  const out: Partial<SandboxTags> = {};
  for (const key of ['lane', 'slot', 'worker'] as const) {
    const value = tags.get(key);
    if (value !== undefined) out[key] = value;
  }
  return out;
}
