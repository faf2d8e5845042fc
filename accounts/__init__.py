"""Users, projects (tenants), memberships, quotas, API tokens and the audit log."""
