-- cronwheel PostgreSQL schema, step 22: each worker announces the brokers its operator
-- named, name -> kind ({"events": "nats"}), never their URLs; the API refuses a publish
-- job naming a broker no live worker of its pool names (issue 30 item 2, decision 0049).
ALTER TABLE workers ADD COLUMN brokers jsonb NOT NULL DEFAULT '{}';
