"""DP maths a privacy reviewer audits: noise and exact samplers, sensitivities, the report."""
