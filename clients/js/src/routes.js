// The route of each SDK method: ROUTES, generated from the service's openapi.json into
// generated/routes.js (`make sdk`), as [method, path, action, query] (action: the
// x-signature-action, null for the public routes; query: the query parameters it takes
// besides ownerAddress). tests/unit/test_sdk_coverage.py checks the client's methods against
// it, so a route without a call fails a test.
import { ROUTES } from "./generated/routes.js";

export { ROUTES };

/**
 * The { method, path, action, queryNames } of the SDK method `name`, its path parameters
 * filled in (the transport refuses a query parameter that is not in queryNames).
 */
export function route(name, params = {}) {
  const [method, template, action, queryNames = []] = ROUTES[name];
  const path = template.replace(/\{(\w+)\}/g, (_, key) => encodeURIComponent(params[key]));
  return { method, path, action, queryNames };
}
