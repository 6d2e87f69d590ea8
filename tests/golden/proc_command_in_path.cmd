false --ignored-argument
