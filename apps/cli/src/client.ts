/** A small HTTP client for the CLI's remote commands. */
export interface ClientOptions {
  url: string;
  token?: string;
}

export class ApiClientError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    const e = (body as { error?: { code?: string; message?: string } })?.error;
    super(e ? `${e.code}: ${e.message}` : `HTTP ${status}`);
  }
}

export async function call<T>(options: ClientOptions, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const res = await fetch(`${options.url}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  const parsed = text ? (JSON.parse(text) as T) : (undefined as T);
  if (res.status >= 400) throw new ApiClientError(res.status, parsed);
  return { status: res.status, body: parsed };
}
