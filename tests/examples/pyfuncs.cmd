/usr/bin/python3.11 -c "exec(compile('def greet(n):\n return n + 1\ndef main():\n for i in range(4):\n  greet(i)\nmain()\nmain()\n', 'demo.py', 'exec'))"
