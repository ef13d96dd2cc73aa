"""The privacy budget: costs and their kinds, the durable ledger, releases kept in it."""
