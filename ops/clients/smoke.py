"""Smoke test of the Python client openapi-python-client generated from the served OpenAPI
document (ops/clients/check): create a contact, a template and a draft broadcast, read the
broadcast back, list contacts with a filter, get a 404 as a typed error, and send a contact
import as a multipart file and read it back.

Usage: smoke.py <base URL> <API key> (the generated package `parley_api_client` on PYTHONPATH).
"""

import io
import sys
import uuid

from parley_api_client import AuthenticatedClient
from parley_api_client.api.broadcasts import broadcasts_create, broadcasts_get
from parley_api_client.api.contacts import (
    contacts_create,
    contacts_create_import,
    contacts_get,
    contacts_get_import,
    contacts_list,
)
from parley_api_client.api.templates import templates_create
from parley_api_client.models import (
    Channel,
    CreateBroadcast,
    CreateContact,
    CreateTemplate,
    EnvelopeBroadcast,
    EnvelopeContact,
    EnvelopeContactImport,
    EnvelopeTemplate,
    ErrorEnvelope,
    ImportUpload,
    ListEnvelopeContact,
)
from parley_api_client.types import File


def check(condition, what):
    if not condition:
        raise SystemExit(f"python client smoke: {what}")


def main(base, key):
    client = AuthenticatedClient(base_url=base, token=key, raise_on_unexpected_status=True)
    email = f"smoke-{uuid.uuid4().hex}@example.com"
    contact = contacts_create.sync(client=client, body=CreateContact(source="smoke", name="Smoke Py", email=email))
    check(isinstance(contact, EnvelopeContact), f"contact not created: {contact}")
    check(contact.data.email == email, f"contact email {contact.data.email}")

    template = templates_create.sync(
        client=client,
        body=CreateTemplate(name="Smoke template", channel=Channel.EMAIL, body="Hi {{contact.name}}"),
    )
    check(isinstance(template, EnvelopeTemplate), f"template not created: {template}")

    draft = broadcasts_create.sync(
        client=client,
        body=CreateBroadcast(
            broadcast_name="Smoke draft",
            template_id=template.data.id,
            contact_ids=[contact.data.id],
            is_draft=True,
        ),
    )
    check(isinstance(draft, EnvelopeBroadcast), f"broadcast not created: {draft}")
    read = broadcasts_get.sync(client=client, id=draft.data.id)
    check(isinstance(read, EnvelopeBroadcast), f"broadcast not read: {read}")
    check(read.data.id == draft.data.id, "another broadcast read back")
    check(read.data.status.value == "draft", f"status {read.data.status}")

    page = contacts_list.sync(client=client, email=email, page_size=10)
    check(isinstance(page, ListEnvelopeContact), f"contacts not listed: {page}")
    check([c.id for c in page.data] == [contact.data.id], "the filter did not find the contact")

    missing = contacts_get.sync_detailed(client=client, id=uuid.uuid4())
    check(missing.status_code == 404, f"status {missing.status_code}")
    check(isinstance(missing.parsed, ErrorEnvelope), f"404 not typed: {missing.parsed}")
    check(missing.parsed.error.code == "not_found", f"code {missing.parsed.error.code}")

    csv = f"email,name\nimport-{uuid.uuid4().hex}@example.com,Imported\n".encode()
    upload = ImportUpload(file=File(payload=io.BytesIO(csv), file_name="contacts.csv", mime_type="text/csv"))
    started = contacts_create_import.sync(client=client, body=upload)
    check(isinstance(started, EnvelopeContactImport), f"import not created: {started}")
    check(started.data.format_.value == "csv", f"import format {started.data.format_}")
    again = contacts_get_import.sync(client=client, id=started.data.id)
    check(isinstance(again, EnvelopeContactImport), f"import not read: {again}")
    check(again.data.id == started.data.id, "another import read back")
    print("python client smoke: ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
