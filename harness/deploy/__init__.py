"""From a topology to what runs: the plan (ports, proxied links), broker configs, TLS, images."""
