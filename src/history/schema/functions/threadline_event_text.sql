-- A log row's payload as the stream sends it: JSON.stringify of the value node-pg parses from the
-- jsonb, byte for byte — what PostgreSQL prints for it without the blanks after ':' and ',' (its
-- strings escape exactly as JSON.stringify's do; jsonb_each walks keys in the order it prints
-- them). NULL where the two could differ, and readers send that row the old way: a number with a
-- fraction or of 16 digits or more (PostgreSQL prints the decimal it holds, JavaScript the
-- shortest form of a double), and an integer-like key (JavaScript enumerates those first).
CREATE OR REPLACE FUNCTION threadline_event_text(p_data jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  v_parts text[];
BEGIN
  CASE jsonb_typeof(p_data)
  WHEN 'object' THEN
    SELECT array_agg(CASE WHEN e.key !~ '^[0-9]+$' THEN to_json(e.key)::text || ':' || CASE jsonb_typeof(e.value)
        WHEN 'number' THEN CASE WHEN e.value::text !~ '[.]|[0-9]{16}' THEN e.value::text END
        WHEN 'object' THEN threadline_event_text(e.value)
        WHEN 'array' THEN threadline_event_text(e.value)
        ELSE e.value::text END END)
      INTO v_parts FROM jsonb_each(p_data) e;
    RETURN CASE WHEN v_parts IS NULL THEN '{}' WHEN array_position(v_parts, NULL) IS NULL THEN '{' || array_to_string(v_parts, ',') || '}' END;
  WHEN 'array' THEN
    SELECT array_agg(CASE jsonb_typeof(e.value)
        WHEN 'number' THEN CASE WHEN e.value::text !~ '[.]|[0-9]{16}' THEN e.value::text END
        WHEN 'object' THEN threadline_event_text(e.value)
        WHEN 'array' THEN threadline_event_text(e.value)
        ELSE e.value::text END)
      INTO v_parts FROM jsonb_array_elements(p_data) e;
    RETURN CASE WHEN v_parts IS NULL THEN '[]' WHEN array_position(v_parts, NULL) IS NULL THEN '[' || array_to_string(v_parts, ',') || ']' END;
  WHEN 'number' THEN
    RETURN CASE WHEN p_data::text !~ '[.]|[0-9]{16}' THEN p_data::text END;
  ELSE
    RETURN p_data::text;
  END CASE;
END
$$;
