-- Receipts that arrive before their recipient's outcome (and so its message id) is written:
-- a fast provider's `delivered` can beat the worker's write. They wait here, are applied by
-- the worker's ticker once the message id is known, and are dropped after ten minutes if it
-- never is (an id the provider made up, or of another deployment): an outcome lands within
-- milliseconds of the provider's answer, or after a crash within the claim lease.
CREATE TABLE early_receipts (
    channel              text        NOT NULL,
    external_message_id  text        NOT NULL,
    status               text        NOT NULL
        CHECK (status IN ('delivered', 'read', 'replied', 'failed')),
    occurred_at          timestamptz NOT NULL,
    error_code           text,
    received_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (channel, external_message_id, status)
);

CREATE INDEX early_receipts_received_at ON early_receipts (received_at);
