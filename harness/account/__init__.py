"""The broker's account of every message (docs/contracts.md, "The broker's account").

- `plugin`: builds BrokerAccount.java (an ActiveMQ BrokerPlugin) and puts it into a broker's files;
- `records`: the contract of each member's `account.jsonl` and the merged `brokers/account.jsonl`;
- `journey`: one message's hops through the brokers, read from the account.
"""
