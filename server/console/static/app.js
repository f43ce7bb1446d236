// the console: placeholder
