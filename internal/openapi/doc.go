// Package openapi checks HTTP answers against an OpenAPI 3.1 document: it
// finds the operation's response schema for a status and validates a JSON
// body against it (the JSON Schema subset such documents use: type with
// null, properties, required, items, enum, oneOf, anyOf, allOf, $ref,
// additionalProperties, minimum, maximum). Contract tests use it to hold
// aiod's answers to its published API.
package openapi
