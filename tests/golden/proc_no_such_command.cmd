nosuch-utap-command --flag
