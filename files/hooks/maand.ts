// maand's maand.ts (maand-sh/maand jobcommand/maand.ts), shipped with maand.core for Bun job
// commands, changed only where maand.core's runtime API differs: the port comes from
// MAAND_RUNTIME_API_PORT (an ephemeral port per run), every call carries MAAND_RUNTIME_API_TOKEN, and
// the two reads (getStoreValue, listJobKeys) send their fields in the query string, since Bun's fetch
// refuses a GET with a body (maand's maand.ts fails there with "fetch() request with GET/HEAD method
// cannot have body", tests/integration/test_hooks_bun_fleet.py).
//
// Copyright (c) 2025 Kiruba Sankar Swaminathan. MIT License:
// Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
// associated documentation files (the "Software"), to deal in the Software without restriction,
// including without limitation the rights to use, copy, modify, merge, publish, distribute,
// sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
// furnished to do so, subject to the following conditions: The above copyright notice and this
// permission notice shall be included in all copies or substantial portions of the Software.
// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
// NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
// NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
// DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT
// OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.

/** Client for the maand command runtime API (KV store, demands, semaphores). */

const RUNTIME_API_PORT = 8080;
const ROUTE_STORE_KEYS = "/kv";
const ROUTE_STORE_KEYS_LIST = "/kv/keys";
const ROUTE_STORE_SECRET = "/kv/secret";
const ROUTE_DEMANDS = "/demands";
const ROUTE_SEMAPHORE_ACQUIRE = "/semaphore/acquire";
const ROUTE_SEMAPHORE_RELEASE = "/semaphore/release";
const ROUTE_SEMAPHORE_STATUS = "/semaphore/status";

export function allocationId(): string | undefined {
  return process.env.ALLOCATION_ID;
}

export function allocationIp(): string | undefined {
  return process.env.ALLOCATION_IP;
}

export function allocationIndex(): string | undefined {
  return process.env.ALLOCATION_INDEX;
}

export function isAllocationDisabled(): boolean {
  return process.env.DISABLED === "1";
}

export function commandEvent(): string | undefined {
  return process.env.EVENT;
}

export function commandName(): string | undefined {
  return process.env.COMMAND;
}

export function jobName(): string | undefined {
  return process.env.JOB;
}

function runtimeApiBaseUrl(): string {
  const host = process.env.JOB_COMMAND_API_HOST ?? "127.0.0.1";
  const port = process.env.MAAND_RUNTIME_API_PORT ?? String(RUNTIME_API_PORT);
  return `http://${host}:${port}`;
}

function runtimeRequestHeaders(): Record<string, string> {
  return {
    "X-ALLOCATION-ID": allocationId() ?? "",
    COMMAND: commandName() ?? "",
    EVENT: commandEvent() ?? "",
    "X-MAAND-TOKEN": process.env.MAAND_RUNTIME_API_TOKEN ?? "",
  };
}

export async function getStoreValue(namespace: string, key: string): Promise<Response> {
  // maand.core: the fields in the query string (Bun's fetch refuses a GET with a body; maand's sends
  // them as a JSON body, which maand.core's runtime API accepts too).
  const query = new URLSearchParams({ namespace, key });
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_STORE_KEYS}?${query}`, {
    method: "GET",
    headers: runtimeRequestHeaders(),
  });
}

export async function putRolloutOrder(order: string | string[]): Promise<Response> {
  const job = jobName();
  const value = Array.isArray(order) ? order.map(String).filter(Boolean).join(",") : order;
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_STORE_KEYS}`, {
    method: "PUT",
    headers: {
      ...runtimeRequestHeaders(),
      "Content-Type": "application/json",
    },
    body: JSON.stringify({
      namespace: `maand/job/${job}`,
      key: "rollout_order",
      value,
    }),
  });
}

export async function getRolloutOrder(): Promise<Response> {
  const job = jobName();
  return getStoreValue(`maand/job/${job}`, "rollout_order");
}

/** putRolloutOrder under its name in maand's maand.ts before June 2026 (deploy_order). */
export async function putDeployOrder(order: string | string[]): Promise<Response> {
  return putRolloutOrder(order);
}

/** getRolloutOrder under its name in maand's maand.ts before June 2026 (deploy_order). */
export async function getDeployOrder(): Promise<Response> {
  return getRolloutOrder();
}

export async function putJobVariable(key: string, value: string): Promise<Response> {
  const job = jobName();
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_STORE_KEYS}`, {
    method: "PUT",
    headers: {
      ...runtimeRequestHeaders(),
      "Content-Type": "application/json",
    },
    body: JSON.stringify({
      namespace: `vars/job/${job}`,
      key,
      value,
    }),
  });
}

export async function putJobSecret(key: string, value: string): Promise<Response> {
  const job = jobName();
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_STORE_SECRET}`, {
    method: "PUT",
    headers: {
      ...runtimeRequestHeaders(),
      "Content-Type": "application/json",
    },
    body: JSON.stringify({
      namespace: `secrets/job/${job}`,
      key,
      value,
    }),
  });
}

export async function listJobKeys(namespace?: string): Promise<Response> {
  // maand.core: the namespace in the query string (see getStoreValue)
  const query = namespace ? `?${new URLSearchParams({ namespace })}` : "";
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_STORE_KEYS_LIST}${query}`, {
    method: "GET",
    headers: runtimeRequestHeaders(),
  });
}

export async function deleteJobVariable(key: string): Promise<Response> {
  const job = jobName();
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_STORE_KEYS}`, {
    method: "DELETE",
    headers: {
      ...runtimeRequestHeaders(),
      "Content-Type": "application/json",
    },
    body: JSON.stringify({
      namespace: `vars/job/${job}`,
      key,
    }),
  });
}

export async function deleteJobSecret(key: string): Promise<Response> {
  const job = jobName();
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_STORE_SECRET}`, {
    method: "DELETE",
    headers: {
      ...runtimeRequestHeaders(),
      "Content-Type": "application/json",
    },
    body: JSON.stringify({
      namespace: `secrets/job/${job}`,
      key,
    }),
  });
}

export async function listCommandDemands(): Promise<Response> {
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_DEMANDS}`, {
    headers: runtimeRequestHeaders(),
  });
}

export async function acquireSemaphore(
  name: string,
  capacity = 1,
  timeoutSeconds = 600,
): Promise<Response> {
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_SEMAPHORE_ACQUIRE}`, {
    method: "POST",
    headers: {
      ...runtimeRequestHeaders(),
      "Content-Type": "application/json",
    },
    body: JSON.stringify({ name, capacity, timeout_seconds: timeoutSeconds }),
    signal: AbortSignal.timeout((timeoutSeconds + 30) * 1000),
  });
}

export async function releaseSemaphore(name: string): Promise<Response> {
  return fetch(`${runtimeApiBaseUrl()}${ROUTE_SEMAPHORE_RELEASE}`, {
    method: "POST",
    headers: {
      ...runtimeRequestHeaders(),
      "Content-Type": "application/json",
    },
    body: JSON.stringify({ name }),
  });
}

export async function semaphoreStatus(name: string): Promise<Response> {
  const url = new URL(`${runtimeApiBaseUrl()}${ROUTE_SEMAPHORE_STATUS}`);
  url.searchParams.set("name", name);
  return fetch(url, { headers: runtimeRequestHeaders() });
}

// Backward-compatible aliases for older job command scripts.
export const getAllocationId = allocationId;
export const getAllocationIp = allocationIp;
export const getAllocationIndex = allocationIndex;
export const getEvent = commandEvent;
export const getCommand = commandName;
export const getJob = jobName;
export const kvGet = getStoreValue;
export const kvPut = putJobVariable;
export const kvPutSecret = putJobSecret;
export const getDemands = listCommandDemands;
