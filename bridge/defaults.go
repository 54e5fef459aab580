package bridge

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix is the prefix of the bridge's environment variables: the
// field tagged envconfig:"API_URL" is DIRECTBRIDGE_API_URL.
const EnvPrefix = "DIRECTBRIDGE"

// DefaultConfig is the configuration with every setting at its default,
// what `directbridge serve` runs with in an empty environment: the
// embedded sandbox as the provider, listeners on loopback, the data
// directory under the user's state directory. An embedder starts from it
// and sets what it needs; New checks the result. It reads nothing from
// the environment.
func DefaultConfig() Config {
	var c Config
	if err := setDefaults(reflect.ValueOf(&c).Elem()); err != nil {
		panic(err) // a default tag that does not parse: TestDefaultConfig
	}
	return c
}

// ConfigFromEnv is the configuration the DIRECTBRIDGE_* environment
// variables give, the others at their defaults (the names and defaults
// are the fields' tags, listed by `directbridge help`).
func ConfigFromEnv() (Config, error) {
	var c Config
	err := ReadEnv(&c)
	return c, err
}

// ReadEnv fills spec, a pointer to a struct whose fields carry envconfig
// tags (the variable's name without the prefix, its default), from the
// DIRECTBRIDGE_* environment variables, the others at their defaults. It
// reads those alone: envconfig.Process also takes a variable without the
// prefix when the prefixed one is unset (DATA_DIR for
// DIRECTBRIDGE_DATA_DIR, LOG_LEVEL, API_URL), and such names are common
// in a container's environment for other programs, where they could
// change the bridge or stop it from starting. Values are read as
// envconfig reads them (strconv, time.ParseDuration).
func ReadEnv(spec any) error {
	v := reflect.ValueOf(spec).Elem()
	if err := setDefaults(v); err != nil {
		return err
	}
	return setFromEnv(v)
}

// setFromEnv sets every tagged field of v, and of its embedded structs,
// whose prefixed variable is set.
func setFromEnv(v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous && fv.Kind() == reflect.Struct {
			if err := setFromEnv(fv); err != nil {
				return err
			}
			continue
		}
		key := f.Tag.Get("envconfig")
		if key == "" || !fv.CanSet() {
			continue
		}
		name := EnvPrefix + "_" + strings.ToUpper(key)
		val, ok := os.LookupEnv(name)
		if !ok {
			continue
		}
		if err := setValue(fv, val); err != nil {
			return fmt.Errorf("%s: %q is not a valid %s: %w", name, val, kindName(fv), err)
		}
	}
	return nil
}

// kindName names what a field takes, for an error.
func kindName(v reflect.Value) string {
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		return "duration (such as 30s or 5m)"
	}
	switch v.Kind() {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	}
	return v.Kind().String()
}

// setDefaults sets every field of the struct v that has a default tag,
// and those of its embedded structs, as envconfig would with nothing set.
func setDefaults(v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous && fv.Kind() == reflect.Struct {
			if err := setDefaults(fv); err != nil {
				return err
			}
			continue
		}
		def, ok := f.Tag.Lookup("default")
		if !ok || !fv.CanSet() {
			continue
		}
		if err := setValue(fv, def); err != nil {
			return fmt.Errorf("bridge: default of %s (%q): %w", f.Name, def, err)
		}
	}
	return nil
}

// setValue parses s into v, for the kinds Config's fields have.
func setValue(v reflect.Value, s string) error {
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		v.SetInt(int64(d))
		return err
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		v.SetBool(b)
		return err
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 0, v.Type().Bits())
		v.SetInt(n)
		return err
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 0, v.Type().Bits())
		v.SetUint(n)
		return err
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(s, v.Type().Bits())
		v.SetFloat(x)
		return err
	default:
		return fmt.Errorf("no default for a field of kind %s", v.Kind())
	}
	return nil
}
