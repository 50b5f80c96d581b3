// Smoke test of the TypeScript client (openapi-typescript types, openapi-fetch) generated from
// the served OpenAPI document (ops/clients/check): the same steps as smoke.py. Compiled by tsc
// against the generated `schema.d.ts`, so a call that does not fit the document fails before
// it runs. Usage: node smoke.js <base URL> <API key>
import { randomUUID } from "node:crypto";
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

function check(condition: boolean, what: string): asserts condition {
  if (!condition) {
    console.error(`typescript client smoke: ${what}`);
    process.exit(1);
  }
}

async function main(base: string, key: string) {
  const client = createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${key}` } });
  const email = `smoke-${randomUUID()}@example.com`;

  const contact = await client.POST("/api/v1/contacts", {
    body: { source: "smoke", name: "Smoke TS", email },
  });
  check(contact.data !== undefined, `contact not created: ${JSON.stringify(contact.error)}`);
  check(contact.data.data.email === email, "contact email");

  const template = await client.POST("/api/v1/templates", {
    body: { name: "Smoke template", channel: "email", body: "Hi {{contact.name}}" },
  });
  check(template.data !== undefined, `template not created: ${JSON.stringify(template.error)}`);

  const draft = await client.POST("/api/v1/broadcasts", {
    body: {
      broadcastName: "Smoke draft",
      templateId: template.data.data.id,
      contactIds: [contact.data.data.id],
      isDraft: true,
    },
  });
  check(draft.data !== undefined, `broadcast not created: ${JSON.stringify(draft.error)}`);
  const read = await client.GET("/api/v1/broadcasts/{id}", {
    params: { path: { id: draft.data.data.id } },
  });
  check(read.data !== undefined, `broadcast not read: ${JSON.stringify(read.error)}`);
  check(read.data.data.status === "draft", `status ${read.data.data.status}`);

  const page = await client.GET("/api/v1/contacts", {
    params: { query: { email, pageSize: 10 } },
  });
  check(page.data !== undefined, `contacts not listed: ${JSON.stringify(page.error)}`);
  check(
    page.data.data.length === 1 && page.data.data[0].id === contact.data.data.id,
    "the filter did not find the contact",
  );

  const missing = await client.GET("/api/v1/contacts/{id}", {
    params: { path: { id: randomUUID() } },
  });
  check(missing.response.status === 404, `status ${missing.response.status}`);
  check(missing.error !== undefined, "404 not typed");
  check(missing.error.error.code === "not_found", `code ${missing.error.error.code}`);
  console.log("typescript client smoke: ok");
}

main(process.argv[2], process.argv[3]).catch((e) => {
  console.error(e);
  process.exit(1);
});
