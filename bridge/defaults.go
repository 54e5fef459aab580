package bridge

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
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

// ReadEnv fills spec, a pointer to a struct with envconfig tags, from the
// DIRECTBRIDGE_* environment variables, as envconfig.Process does, but
// from those alone: envconfig also takes a variable without the prefix
// when the prefixed one is unset (DATA_DIR for DIRECTBRIDGE_DATA_DIR,
// LOG_LEVEL, API_URL), and such names are common in a container's
// environment for other programs. A field whose prefixed variable is
// unset keeps its default.
func ReadEnv(spec any) error {
	if err := envconfig.Process(EnvPrefix, spec); err != nil {
		return err
	}
	v := reflect.ValueOf(spec).Elem()
	defaults := reflect.New(v.Type()).Elem()
	if err := setDefaults(defaults); err != nil {
		return err
	}
	resetUnprefixed(v, defaults)
	return nil
}

// resetUnprefixed sets back to its default every tagged field of v whose
// prefixed variable is unset.
func resetUnprefixed(v, defaults reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && v.Field(i).Kind() == reflect.Struct {
			resetUnprefixed(v.Field(i), defaults.Field(i))
			continue
		}
		key := f.Tag.Get("envconfig")
		if key == "" || !v.Field(i).CanSet() {
			continue
		}
		if _, set := os.LookupEnv(EnvPrefix + "_" + strings.ToUpper(key)); !set {
			v.Field(i).Set(defaults.Field(i))
		}
	}
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
