"""What a privacy reviewer audits: policy, budget, ledger, noise, sensitivity maths."""
