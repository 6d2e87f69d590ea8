/nonexistent/utap-program
