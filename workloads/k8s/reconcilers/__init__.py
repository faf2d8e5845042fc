"""One reconciler class per Kubernetes kind: desired, current, compare, act. They read no rows;
the services hand them what they compare against."""
